//! How a run's end is read: what its call came to, and what it left besides (its network
//! log, what it printed).

use super::{
    bindings, codes, net, output, traps, uncaught, ErrorSource, Failure, GuestOutcome, HostState, Limits, RunReport,
};

/// What the run left besides its outcome, added to its report and to how it ended: a refused
/// request is why a run that then failed failed, and what the guest printed last tells why the
/// host had to stop it (a traceback, an Error).
pub(super) fn what_it_left(
    outcome: GuestOutcome,
    report: &mut RunReport,
    net_log: &net::NetLog,
    output: &output::GuestOutput,
    max_log_bytes: usize,
) -> GuestOutcome {
    report.add_network(net_log.lines());
    let printed = output.take();
    // A trap after an exception's report is that exception, whatever the language.
    let outcome = match outcome {
        GuestOutcome::Failed(f) if f.code == codes::TRAP => match uncaught::report(printed.stderr_lines()) {
            Some(report) => GuestOutcome::Failed(Failure::uncaught(report)),
            None => GuestOutcome::Failed(f),
        },
        outcome => outcome,
    };
    let outcome = match (outcome, net_log.refusal()) {
        (GuestOutcome::Failed(f), Some(r)) => GuestOutcome::Failed(f.after_refusal(&r)),
        (outcome, _) => outcome,
    };
    let outcome = match (outcome, printed.tail()) {
        (GuestOutcome::Failed(mut f), Some(tail)) if f.source == ErrorSource::Host => {
            f.message = format!("{}; the guest's last output: {tail}", f.message);
            GuestOutcome::Failed(f.bounded())
        }
        (outcome, _) => outcome,
    };
    report.add_printed(printed, max_log_bytes);
    outcome
}

/// What a call that returned (in time) came to; `for_time` makes the failure of a run stopped
/// for time.
pub(super) fn outcome_of(
    called: wasmtime::Result<std::result::Result<Option<String>, bindings::HandlerError>>,
    state: &HostState,
    limits: &Limits,
    for_time: impl Fn(bool) -> Failure,
) -> GuestOutcome {
    match called {
        Err(e) => {
            let f = traps::classify(&e, state, limits);
            if f.kind == traps::FailureKind::Timeout {
                GuestOutcome::Failed(for_time(false))
            } else {
                GuestOutcome::Failed(f.bounded())
            }
        }
        Ok(Err(he)) => GuestOutcome::Failed(Failure::handler(he)),
        // What a snoozed or waiting run returned is not its task's results: it has none yet.
        Ok(Ok(results)) => match (&state.signals.wait, state.snooze) {
            (Some(wait), _) => GuestOutcome::Awaiting(wait.clone()),
            (None, Some(after)) => GuestOutcome::Snoozed(after),
            (None, None) => traps::check_results(results, limits),
        },
    }
}
