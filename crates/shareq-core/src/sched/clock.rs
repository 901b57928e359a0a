//! Whose clock the scheduler's instants are read on: the wall clock of the live runtime or
//! the simulated seconds of a replay. The core reads no clock itself; the driver says which
//! one its instants come from, and that decides what an instant means.

use super::Time;

/// How the driver obtains "now".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// The live runtime (and forecasts on a copy of it): instants are milliseconds since
    /// the epoch, read from the wall clock; started jobs wait for their supervisor.
    Wall,
    /// `shareq replay` (SPEC §6): instants are whole simulated seconds; a started job runs
    /// at once and a stop with no delay releases its GPUs inside the pass.
    Simulated,
}

impl Clock {
    /// Instants per second: 1000 on the wall clock, 1 in a simulation.
    pub fn ticks_per_second(self) -> i64 {
        match self {
            Clock::Wall => 1000,
            Clock::Simulated => 1,
        }
    }

    /// No process stands between a start and its run: a simulated job is RUNNING as soon
    /// as it is placed, and a victim with a zero stop delay is gone within the pass.
    pub fn acts_at_once(self) -> bool {
        self == Clock::Simulated
    }

    /// An instant as an operator reads it: the local time of day (HH:MM, `utc_offset_secs`
    /// from UTC) on the wall clock; `t=<seconds>` on simulated time.
    pub fn text(self, t: Time, utc_offset_secs: i32) -> String {
        match self {
            Clock::Simulated => format!("t={t}"),
            Clock::Wall => {
                let secs = t.div_euclid(1000) + i64::from(utc_offset_secs);
                let minute = secs.div_euclid(60).rem_euclid(24 * 60);
                format!("{:02}:{:02}", minute / 60, minute % 60)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Clock;

    #[test]
    fn instants_read_per_clock() {
        assert_eq!(Clock::Simulated.text(90, 3600), "t=90");
        // 14:02 UTC, shown one hour east of UTC.
        let t = (14 * 3600 + 2 * 60) * 1000;
        assert_eq!(Clock::Wall.text(t, 3600), "15:02");
        assert_eq!(Clock::Wall.text(t, 0), "14:02");
        assert_eq!(Clock::Wall.ticks_per_second(), 1000);
        assert_eq!(Clock::Simulated.ticks_per_second(), 1);
        assert!(Clock::Simulated.acts_at_once() && !Clock::Wall.acts_at_once());
    }
}
