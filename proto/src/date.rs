//! Calendar dates without a date crate: days since the Unix epoch to a proleptic
//! Gregorian (year, month, day), for the job's default `--date-to` and the synthetic
//! corpus's timestamps.

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's
/// `civil_from_days`). Negative days are before 1970.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day) to days since 1970-01-01, the inverse of [`civil_from_days`]
/// (Howard Hinnant's `days_from_civil`).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let (m, d) = (m as i64, d as i64);
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A calendar date `YYYY-MM-DD` (proleptic Gregorian, year 0001 to 9999): the one parser
/// of every date flag (`--date-to`, `--base-at`) and of a stored job's `DateTo`, which the
/// dashboard decodes as a Go `civil.Date`. Anything that is not a day of the calendar
/// (`2024-99-99`, `2026-02-30`, `2024-4-8`, `+202-01-01`) is refused, never normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    /// Year, 1 to 9999.
    pub year: u16,
    /// Month, 1 to 12.
    pub month: u8,
    /// Day of the month, 1 to its last day.
    pub day: u8,
}

/// Why a text is not a [`Date`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DateError {
    /// Not of the form `YYYY-MM-DD` (four, two and two ASCII digits).
    #[error("expected YYYY-MM-DD")]
    Shape,
    /// A month outside 01 to 12.
    #[error("month {0} does not exist (01 to 12)")]
    Month(u32),
    /// A day its month does not have.
    #[error("day {day} does not exist in {year:04}-{month:02} (01 to {last:02})")]
    Day {
        /// The year given.
        year: u32,
        /// The month given.
        month: u32,
        /// The day given, which that month does not have.
        day: u32,
        /// The last day of that month.
        last: u32,
    },
    /// Year 0000.
    #[error("year 0000 is not a calendar year here (0001 to 9999)")]
    Year,
}

impl Date {
    /// Days in `month` of `year` (Gregorian leap years).
    pub fn days_in_month(year: u32, month: u32) -> u32 {
        match month {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            _ if (year.is_multiple_of(4) && !year.is_multiple_of(100))
                || year.is_multiple_of(400) =>
            {
                29
            }
            _ => 28,
        }
    }

    /// Days since 1970-01-01.
    pub fn days(&self) -> i64 {
        days_from_civil(self.year as i64, self.month as u32, self.day as u32)
    }

    /// Unix time of this date's last second, 23:59:59 UTC.
    pub fn end_of_day_utc(&self) -> i64 {
        self.days() * 86_400 + 86_399
    }
}

impl Date {
    /// The first day of a period of `duration` days ending on `self` (0 and 1: one
    /// day), refused when negative or when it would start before 0001-01-01.
    pub fn period_start(self, duration: i64) -> Result<Date, String> {
        if duration < 0 {
            return Err(format!(
                "--duration {duration}: a period of days, 0 or more"
            ));
        }
        let first = self.days().checked_sub(duration.max(1) - 1);
        let Some(first) = first.filter(|&f| f >= days_from_civil(1, 1, 1)) else {
            return Err(format!(
                "--duration {duration}: the period ending on {self} would start before 0001-01-01"
            ));
        };
        let (y, m, d) = civil_from_days(first);
        Ok(Date {
            year: y as u16,
            month: m as u8,
            day: d as u8,
        })
    }
}

impl std::str::FromStr for Date {
    type Err = DateError;

    fn from_str(s: &str) -> Result<Date, DateError> {
        let b = s.as_bytes();
        let digits = |r: std::ops::Range<usize>| -> Option<u32> {
            b[r].iter().try_fold(0u32, |n, c| {
                c.is_ascii_digit().then(|| n * 10 + (c - b'0') as u32)
            })
        };
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return Err(DateError::Shape);
        }
        let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10))
        else {
            return Err(DateError::Shape);
        };
        if year == 0 {
            return Err(DateError::Year);
        }
        if !(1..=12).contains(&month) {
            return Err(DateError::Month(month));
        }
        let last = Date::days_in_month(year, month);
        if !(1..=last).contains(&day) {
            return Err(DateError::Day {
                year,
                month,
                day,
                last,
            });
        }
        Ok(Date {
            year: year as u16,
            month: month as u8,
            day: day as u8,
        })
    }
}

impl std::fmt::Display for Date {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// The UTC date `secs` seconds after the Unix epoch, as `YYYY-MM-DD`.
pub fn ymd_utc(secs: u64) -> String {
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Today's date (UTC) as `YYYY-MM-DD`.
pub fn today_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    ymd_utc(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_period_starting_before_year_one_was_called_a_malformed_date() {
        let to: Date = "2024-04-08".parse().unwrap();
        assert_eq!(to.period_start(0).unwrap(), to);
        assert_eq!(to.period_start(30).unwrap().to_string(), "2024-03-10");
        for d in [4_294_967_296, i64::MAX] {
            let e = to.period_start(d).unwrap_err();
            assert!(e.contains("before 0001-01-01"), "{e}");
        }
        assert!(to.period_start(-1).unwrap_err().contains("0 or more"));
        let first: Date = "0001-01-01".parse().unwrap();
        assert_eq!(first.period_start(1).unwrap(), first);
        // Before 1970 the subtraction overflowed (a panic in a debug build).
        let old: Date = "1969-12-29".parse().unwrap();
        assert!(old.period_start(i64::MAX).is_err());
    }

    #[test]
    fn days_from_civil_inverts_civil_from_days() {
        for days in (-800_000..800_000).step_by(97) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2024, 3, 1), 19_783);
    }

    #[test]
    fn impossible_dates_are_refused_not_normalised() {
        for bad in [
            "2024-99-99",
            "2026-02-30",
            "2026-02-29",
            "2100-02-29",
            "2024-04-31",
            "2024-00-10",
            "2024-01-00",
            "0000-01-01",
            "2024-4-8",
            "2024-04-8 ",
            "+202-01-01",
            "2024-04-0\u{661}",
            "２０２４-01-01",
            "",
        ] {
            assert!(bad.parse::<Date>().is_err(), "{bad:?} was accepted");
        }
        for good in [
            "2024-02-29",
            "2000-02-29",
            "2026-12-31",
            "0001-01-01",
            "9999-12-31",
        ] {
            let d: Date = good.parse().unwrap();
            assert_eq!(d.to_string(), good);
        }
        assert_eq!(
            "2024-04-08".parse::<Date>().unwrap().end_of_day_utc(),
            1_712_620_799
        );
    }

    #[test]
    fn every_day_parses_back_to_itself() {
        for days in 0..30_000 {
            let (y, m, d) = civil_from_days(days);
            let s = format!("{y:04}-{m:02}-{d:02}");
            let date: Date = s.parse().unwrap();
            assert_eq!(date.days(), days, "{s}");
        }
    }

    #[test]
    fn known_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(59), (1970, 3, 1));
        // 2000-02-29 (a leap day of a century divisible by 400) and the day after.
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
        // 2100 is not a leap year.
        assert_eq!(civil_from_days(47_540), (2100, 2, 28));
        assert_eq!(civil_from_days(47_541), (2100, 3, 1));
        assert_eq!(ymd_utc(1_717_200_000), "2024-06-01");
        assert_eq!(ymd_utc(1_717_200_000 - 1), "2024-05-31");
    }

    #[test]
    fn consecutive_days_step_by_one() {
        // Every day from 1900 to 2200 follows the previous one on the calendar.
        let mut prev = civil_from_days(-25_567);
        assert_eq!(prev, (1900, 1, 1));
        for z in -25_566..84_000 {
            let (y, m, d) = civil_from_days(z);
            let next_day = (y, m, d) == (prev.0, prev.1, prev.2 + 1);
            let next_month = (y, m, d) == (prev.0, prev.1 + 1, 1);
            let next_year = (y, m, d) == (prev.0 + 1, 1, 1) && prev.1 == 12 && prev.2 == 31;
            assert!(
                next_day || next_month || next_year,
                "{prev:?} -> {:?}",
                (y, m, d)
            );
            assert!(d <= 31 && (1..=12).contains(&m));
            prev = (y, m, d);
        }
    }

    #[test]
    fn today_is_a_date() {
        let t = today_utc();
        assert_eq!(t.len(), 10, "{t}");
        assert!(t.as_str() >= "2024-01-01", "{t}");
    }
}
