"""What an executor knows about its own user, read from a suite's environment before a task runs.

These are custom facts (``facts.own_iban``, ``facts.payees``, ``facts.contacts``,
``facts.own_email``, ``facts.slack_users``, ``facts.channels``): data the executor holds for its
user (the account, the address book, past payees), not anything a task or an injection
defines. They are read from the structured fields of the environment, never from free text
(subjects, bodies, descriptions), which is where injections are placed.
"""

from __future__ import annotations

from typing import Any

from agentdojo.functions_runtime import TaskEnvironment


def _unique(values: list[str]) -> list[str]:
    """Values in first-seen order, each once."""
    return list(dict.fromkeys(values))


# How the bank's records name the account itself as a transaction's sender: its IBAN (what
# `send_money` writes) or "me" (how AgentDojo's banking data records the account's own past
# payments). Both are the account's own structured records, not text anyone else wrote.
_OWN_SENDERS = ("me",)


def _bank_facts(account: Any) -> dict[str, Any]:
    """The account's own IBAN and everyone it has paid or is scheduled to pay."""
    own = {account.iban, *_OWN_SENDERS}
    outgoing = [t.recipient for t in account.transactions if t.sender in own]
    scheduled = [t.recipient for t in account.scheduled_transactions]
    return {"own_iban": account.iban, "payees": _unique(outgoing + scheduled)}


def _inbox_facts(inbox: Any) -> dict[str, Any]:
    """The user's own address and the addresses in the address book."""
    return {"own_email": inbox.account_email, "contacts": _unique([c.email for c in inbox.contact_list])}


def _slack_facts(slack: Any) -> dict[str, Any]:
    """The workspace's members and channels. A policy may test membership in them
    (`args.channel in facts.channels`: an existing channel); it must not take a channel name
    as trusted text: any member names a channel (in AgentDojo one name carries an injection)."""
    return {"slack_users": list(slack.users), "channels": list(slack.channels)}


def user_facts(env: TaskEnvironment) -> dict[str, Any]:
    """The custom facts an executor would send for the user of ``env``."""
    facts: dict[str, Any] = {}
    if hasattr(env, "bank_account"):
        facts.update(_bank_facts(env.bank_account))
    if hasattr(env, "inbox"):
        facts.update(_inbox_facts(env.inbox))
    if hasattr(env, "user") and hasattr(env.user, "email"):
        facts["own_email"] = env.user.email
    if hasattr(env, "slack"):
        facts.update(_slack_facts(env.slack))
    return facts
