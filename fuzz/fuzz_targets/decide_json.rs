//! `Policy::decide_json` on arbitrary bytes against each of the three example policies. The
//! outcome is a response that keeps every invariant, or an error that says something; never a
//! panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_engine::Request;
use toolgate_fuzz::{check_order_independent, check_outcome, check_response, example_policies};

fuzz_target!(|data: &[u8]| {
    let lossy;
    let text = match std::str::from_utf8(data) {
        Ok(t) => t,
        Err(_) => {
            lossy = String::from_utf8_lossy(data);
            &lossy
        }
    };
    let request = Request::from_json(text).ok();
    for policy in example_policies() {
        let outcome = policy.decide_json(text);
        check_outcome(policy, &outcome);
        // decide_json is exactly from_json + target check + decide.
        match (&request, &outcome) {
            (Some(req), Ok(r)) => {
                check_response(policy, req, r);
                check_order_independent(policy, req, r);
                assert_eq!(r, &policy.decide(req));
            }
            (None, Ok(_)) => panic!("decide_json accepted what from_json rejected"),
            (Some(req), Err(_)) => assert!(policy.check_request(req).is_err()),
            (None, Err(_)) => {}
        }
    }
});
