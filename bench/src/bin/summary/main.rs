//! Writes bench/RESULTS.md: the criterion medians (read from target/criterion), the hot-swap
//! latency percentiles and the memory figures measured here, and PASS/MISS per target.
//!
//! Run `cargo bench` first, then `cargo run --release --bin summary`.

mod counting_alloc;
mod hot_swap;
mod memory;
mod report;

#[global_allocator]
static ALLOC: counting_alloc::Counting = counting_alloc::Counting;

fn main() {
    let dir = std::env::var("CRITERION_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/target/criterion").to_owned());
    let out = concat!(env!("CARGO_MANIFEST_DIR"), "/RESULTS.md");
    eprintln!("memory ...");
    let memory = match memory::measure() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    eprintln!("hot swap ...");
    let swap = match hot_swap::measure() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let medians = report::Medians::read(std::path::Path::new(&dir));
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into());
    let sizes: Vec<String> = toolgate_bench::documents::BATCH_SIZES
        .iter()
        .map(|&b| {
            let docs = toolgate_bench::documents::bench_documents(b);
            (docs.iter().map(|d| d.json.len()).sum::<usize>() / docs.len()).to_string()
        })
        .collect();
    let machine = format!(
        "{cpus} CPUs, 1-minute load average {load}; facts documents average {} bytes \
         for batch 1 / 4 / 16",
        sizes.join(" / ")
    );
    let text = report::render(&medians, &swap, &memory, &machine);
    if let Err(e) = std::fs::write(out, &text) {
        eprintln!("cannot write {out}: {e}");
        std::process::exit(1);
    }
    print!("{text}");
    eprintln!("wrote {out}");
}
