//! The per-instance registration state machine, in the style of Open5GS's `nf-sm.c`
//! (will_register → registered → de_registered | exception), kept free of I/O: the driver in
//! `lib.rs` feeds it [`Event`]s (request outcomes, timer expiries, shutdown) and performs the
//! [`Action`] it answers with. Timers are events: every `Action::Wait` ends in `Event::Timer`
//! unless shutdown comes first.
//!
//! ```text
//!             Start / Timer                RegisterOk
//!  Registering ─────────▶ (NFRegister) ───────────────▶ Registered ◀──┐ HeartbeatOk
//!      ▲   ▲ RegisterFailed: Wait(backoff)                │ Timer      │
//!      │   └──────────────────────────────────────────────┤ (heartbeat)┘
//!      │ HeartbeatNotFound (404: the NRF forgot us)       │ HeartbeatFailed × N
//!      └──────────────────────────────────────────── Suspended (heartbeats go on)
//!  any ── Shutdown ──▶ (NFDeregister if ever registered) ──▶ Deregistered
//! ```

use std::time::Duration;

/// Where the NF's registration stands, as [`crate::NrfClient::state`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NfState {
    /// Not (or no longer) registered: NFRegister is being sent, or retried with backoff.
    Registering,
    /// Registered, heartbeats answered.
    Registered,
    /// Was registered, but heartbeats have not been answered for a while (NRF unreachable or
    /// failing); heartbeats continue, and a 404 answer sends the NF back to `Registering`.
    Suspended,
    /// Stopped: deregistered on shutdown (or never registered and stopped).
    Deregistered,
}

/// What happened, as fed to [`Fsm::handle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Start,
    /// The wait asked for by the last `Action::Wait` is over.
    Timer,
    /// NFRegister answered 200/201; `heartbeat` is the heartBeatTimer the NRF granted.
    RegisterOk {
        heartbeat: Duration,
    },
    /// NFRegister failed (unreachable, timeout, or an error answer).
    RegisterFailed,
    /// Heartbeat answered 2xx; `heartbeat` if the NRF sent a (new) heartBeatTimer.
    HeartbeatOk {
        heartbeat: Option<Duration>,
    },
    /// Heartbeat answered 404: the NRF does not know this instance (it restarted empty, or
    /// suspended and removed it).
    HeartbeatNotFound,
    /// Heartbeat failed: unreachable, timeout, 5xx, or another error answer.
    HeartbeatFailed,
    /// The NF is stopping.
    Shutdown,
    /// NFDeregister done (whatever its outcome).
    DeregisterDone,
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    SendRegister,
    SendHeartbeat,
    SendDeregister,
    /// Arm the timer; `Event::Timer` when it fires.
    Wait(Duration),
    /// Stop the driver.
    Exit,
}

/// Backoff and heartbeat settings the machine needs.
#[derive(Debug, Clone, Copy)]
pub struct FsmConfig {
    pub retry_initial: Duration,
    pub retry_max: Duration,
    pub heartbeat_percent: u32,
    pub failures_to_suspend: u32,
    pub deregister_on_shutdown: bool,
}

/// The state machine of one NF instance's registration.
#[derive(Debug)]
pub struct Fsm {
    cfg: FsmConfig,
    state: NfState,
    heartbeat: Duration,
    retry: Duration,
    failures: u32,
    ever_registered: bool,
}

impl Fsm {
    pub fn new(cfg: FsmConfig) -> Fsm {
        Fsm {
            cfg,
            state: NfState::Registering,
            heartbeat: Duration::from_secs(10),
            retry: cfg.retry_initial,
            failures: 0,
            ever_registered: false,
        }
    }

    pub fn state(&self) -> NfState {
        self.state
    }

    /// The heartBeatTimer in force (the NRF's last word).
    pub fn heartbeat_timer(&self) -> Duration {
        self.heartbeat
    }

    fn heartbeat_interval(&self) -> Duration {
        (self.heartbeat * self.cfg.heartbeat_percent / 100).max(Duration::from_millis(100))
    }

    /// The wait before the next retry; doubles up to the maximum.
    fn backoff(&mut self) -> Duration {
        let d = self.retry;
        self.retry = (self.retry * 2).min(self.cfg.retry_max);
        d
    }

    /// Feeds one event; returns what to do next.
    pub fn handle(&mut self, ev: Event) -> Action {
        use NfState::*;
        match (self.state, ev) {
            (Deregistered, _) => Action::Exit,
            (_, Event::Shutdown) => {
                if self.ever_registered && self.cfg.deregister_on_shutdown {
                    Action::SendDeregister
                } else {
                    self.state = Deregistered;
                    Action::Exit
                }
            }
            (_, Event::DeregisterDone) => {
                self.state = Deregistered;
                Action::Exit
            }
            (Registering, Event::Start | Event::Timer) => Action::SendRegister,
            (Registering, Event::RegisterOk { heartbeat }) => {
                self.state = Registered;
                self.ever_registered = true;
                self.heartbeat = heartbeat;
                self.retry = self.cfg.retry_initial;
                self.failures = 0;
                Action::Wait(self.heartbeat_interval())
            }
            (Registering, Event::RegisterFailed) => Action::Wait(self.backoff()),
            (Registered | Suspended, Event::Timer) => Action::SendHeartbeat,
            (Registered | Suspended, Event::HeartbeatOk { heartbeat }) => {
                self.state = Registered;
                self.failures = 0;
                self.retry = self.cfg.retry_initial;
                if let Some(h) = heartbeat {
                    self.heartbeat = h;
                }
                Action::Wait(self.heartbeat_interval())
            }
            (Registered | Suspended, Event::HeartbeatNotFound) => {
                self.state = Registering;
                self.failures = 0;
                Action::SendRegister
            }
            (Registered | Suspended, Event::HeartbeatFailed) => {
                self.failures += 1;
                if self.failures >= self.cfg.failures_to_suspend.max(1) {
                    self.state = Suspended;
                }
                // Retry sooner than a full period while failing, but never slower than it.
                let wait = self.backoff().min(self.heartbeat_interval());
                Action::Wait(wait)
            }
            // Outcomes that do not belong to the current state (cannot happen with the driver):
            // resynchronise on a timer.
            (_, ev) => {
                tracing::debug!(state = ?self.state, ?ev, "NRF client FSM: event ignored");
                Action::Wait(self.heartbeat_interval())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fsm() -> Fsm {
        Fsm::new(FsmConfig {
            retry_initial: Duration::from_millis(100),
            retry_max: Duration::from_millis(350),
            heartbeat_percent: 50,
            failures_to_suspend: 2,
            deregister_on_shutdown: true,
        })
    }

    #[test]
    fn register_retry_with_backoff_then_heartbeat() {
        let mut f = fsm();
        assert_eq!(f.handle(Event::Start), Action::SendRegister);
        assert_eq!(f.handle(Event::RegisterFailed), Action::Wait(Duration::from_millis(100)));
        assert_eq!(f.handle(Event::Timer), Action::SendRegister);
        assert_eq!(f.handle(Event::RegisterFailed), Action::Wait(Duration::from_millis(200)));
        assert_eq!(f.handle(Event::RegisterFailed), Action::Wait(Duration::from_millis(350)));
        assert_eq!(f.handle(Event::RegisterFailed), Action::Wait(Duration::from_millis(350)));
        assert_eq!(f.state(), NfState::Registering);
        let a = f.handle(Event::RegisterOk { heartbeat: Duration::from_secs(4) });
        assert_eq!(a, Action::Wait(Duration::from_secs(2)));
        assert_eq!(f.state(), NfState::Registered);
        assert_eq!(f.handle(Event::Timer), Action::SendHeartbeat);
        let a = f.handle(Event::HeartbeatOk { heartbeat: Some(Duration::from_secs(2)) });
        assert_eq!(a, Action::Wait(Duration::from_secs(1)));
    }

    #[test]
    fn failures_suspend_and_404_reregisters() {
        let mut f = fsm();
        f.handle(Event::Start);
        f.handle(Event::RegisterOk { heartbeat: Duration::from_secs(4) });
        f.handle(Event::Timer);
        f.handle(Event::HeartbeatFailed);
        assert_eq!(f.state(), NfState::Registered);
        f.handle(Event::Timer);
        f.handle(Event::HeartbeatFailed);
        assert_eq!(f.state(), NfState::Suspended);
        assert_eq!(f.handle(Event::Timer), Action::SendHeartbeat);
        assert_eq!(f.handle(Event::HeartbeatNotFound), Action::SendRegister);
        assert_eq!(f.state(), NfState::Registering);
    }

    #[test]
    fn shutdown_deregisters_only_when_registered() {
        let mut f = fsm();
        f.handle(Event::Start);
        assert_eq!(f.handle(Event::Shutdown), Action::Exit);
        assert_eq!(f.state(), NfState::Deregistered);

        let mut f = fsm();
        f.handle(Event::Start);
        f.handle(Event::RegisterOk { heartbeat: Duration::from_secs(4) });
        assert_eq!(f.handle(Event::Shutdown), Action::SendDeregister);
        assert_eq!(f.handle(Event::DeregisterDone), Action::Exit);
        assert_eq!(f.state(), NfState::Deregistered);
        assert_eq!(f.handle(Event::Timer), Action::Exit);
    }
}
