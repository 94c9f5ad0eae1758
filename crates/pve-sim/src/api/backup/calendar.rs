//! PVE's calendar events (`pve-calendar-event`, proxmox-time's
//! `CalendarEvent`): a subset of systemd's, parsed with PVE's error texts,
//! and the next time one fires (the job listing's `next-run`).
//!
//! `[weekdays] [[year-]month-day] [hour:minute[:second] | minute]`, or one
//! of the names `minutely`, `hourly`, `daily`, `weekly`, `monthly`,
//! `yearly`/`annually`, `quarterly`, `semiannually`/`semi-annually`.
//! A value is `*`, `n`, `a..b`, with `/step`, or a comma list of those.
//! Times are UTC here (a simulated node has no other zone).

/// A parsed event: the values each field takes (bit `n`: value `n`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    weekdays: u8,
    years: Option<Vec<(u32, u32, u32)>>,
    months: u64,
    days: u64,
    hours: u64,
    minutes: u64,
    seconds: u64,
}

const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const UNUSED: &str = "unable to parse calendar event - unused parts";

fn all(lo: u32, hi: u32) -> u64 {
    (lo..=hi).fold(0, |m, v| m | 1 << v)
}

fn number(text: &str) -> Result<u32, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(UNUSED.into());
    }
    text.parse()
        .map_err(|_| format!("value '{text}' out of range"))
}

/// The `(start, end, step)` runs of one comma-separated field.
fn runs(text: &str, lo: u32, hi: u32) -> Result<Vec<(u32, u32, u32)>, String> {
    let mut out = vec![];
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => {
                let step = number(s)?;
                if step == 0 || step > hi {
                    return Err(format!("repetition '{s}' out of range"));
                }
                (r, Some(step))
            }
            None => (item, None),
        };
        let (start, end) = if range == "*" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once("..") {
            let (a, b) = (number(a)?, number(b)?);
            if a < lo || a > hi {
                return Err(format!("value '{a}' out of range"));
            }
            if b < lo || b > hi {
                return Err(format!("range end '{b}' out of range"));
            }
            if a > b {
                return Err(format!("wrong order in range '{range}'"));
            }
            (a, b)
        } else {
            let a = number(range)?;
            if a < lo || a > hi {
                return Err(format!("value '{range}' out of range"));
            }
            // `a/step` repeats up to the field's end; a lone value is itself.
            (a, if step.is_some() { hi } else { a })
        };
        out.push((start, end, step.unwrap_or(1)));
    }
    Ok(out)
}

fn mask(text: &str, lo: u32, hi: u32) -> Result<u64, String> {
    Ok(runs(text, lo, hi)?
        .into_iter()
        .flat_map(|(a, b, s)| (a..=b).step_by(s as usize))
        .fold(0, |m, v| m | 1 << v))
}

fn weekday(name: &str) -> Option<u32> {
    let lower = name.to_ascii_lowercase();
    WEEKDAYS
        .iter()
        .position(|d| lower == *d || (lower.len() > 3 && lower.starts_with(d)))
        .and_then(|i| u32::try_from(i).ok())
}

/// A weekday list (`mon..fri`, `sat,sun`), or `None` when `text` is not one.
fn weekdays(text: &str) -> Option<Result<u8, String>> {
    if !text.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let mut out = 0u8;
    for item in text.split(',') {
        match item.split_once("..") {
            Some((a, b)) => {
                let (Some(a), Some(b)) = (weekday(a), weekday(b)) else {
                    return Some(Err(UNUSED.into()));
                };
                // Monday first: `sun..sat` is every day, `fri..mon` wrong.
                let (ma, mb) = ((a + 6) % 7, (b + 6) % 7);
                if ma > mb {
                    return Some(Err(format!("wrong order in range '{item}'")));
                }
                for d in ma..=mb {
                    out |= 1 << ((d + 1) % 7);
                }
            }
            None => match weekday(item) {
                Some(d) => out |= 1 << d,
                None => return Some(Err(UNUSED.into())),
            },
        }
    }
    Some(Ok(out))
}

fn special(name: &str) -> Option<&'static str> {
    Some(match name {
        "minutely" => "*-*-* *:*:00",
        "hourly" => "*-*-* *:00:00",
        "daily" => "*-*-* 00:00:00",
        "weekly" => "mon *-*-* 00:00:00",
        "monthly" => "*-*-01 00:00:00",
        "yearly" | "annually" => "*-01-01 00:00:00",
        "quarterly" => "*-01,04,07,10-01 00:00:00",
        "semiannually" | "semi-annually" => "*-01,07-01 00:00:00",
        _ => return None,
    })
}

/// Parses `text` as PVE does; `Err`: PVE's message (without the
/// `invalid calendar event '...' - ` prefix).
pub fn parse(text: &str) -> Result<Event, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("unable to parse calendar event - event is empty".into());
    }
    if let Some(full) = special(&text.to_ascii_lowercase()) {
        return parse(full);
    }
    let mut event = Event {
        weekdays: 0x7f,
        years: None,
        months: all(1, 12),
        days: all(1, 31),
        hours: all(0, 23),
        minutes: all(0, 59),
        seconds: 1,
    };
    let mut tokens = text.split_whitespace().peekable();
    let mut seen = false;
    if let Some(days) = tokens.peek().and_then(|t| weekdays(t)) {
        event.weekdays = days?;
        // A weekday alone fires at midnight.
        event.hours = 1;
        event.minutes = 1;
        tokens.next();
        seen = true;
    }
    if let Some(date) = tokens.peek().filter(|t| t.contains('-')) {
        let parts: Vec<&str> = date.split('-').collect();
        let (year, month, day) = match parts.as_slice() {
            [y, m, d] => (Some(*y), *m, *d),
            [m, d] => (None, *m, *d),
            _ => return Err(UNUSED.into()),
        };
        if let Some(y) = year.filter(|y| *y != "*") {
            event.years = Some(runs(y, 1970, 9999)?);
        }
        event.months = mask(month, 1, 12)?;
        event.days = mask(day, 1, 31)?;
        event.hours = 1;
        event.minutes = 1;
        tokens.next();
        seen = true;
    }
    if let Some(time) = tokens.next() {
        let parts: Vec<&str> = time.split(':').collect();
        match parts.as_slice() {
            [m] => {
                event.hours = all(0, 23);
                event.minutes = mask(m, 0, 59)?;
            }
            [h, m] => {
                event.hours = mask(h, 0, 23)?;
                event.minutes = mask(m, 0, 59)?;
            }
            [h, m, s] => {
                event.hours = mask(h, 0, 23)?;
                event.minutes = mask(m, 0, 59)?;
                event.seconds = mask(s, 0, 59)?;
            }
            _ => return Err(UNUSED.into()),
        }
        seen = true;
    }
    if !seen || tokens.next().is_some() {
        return Err(UNUSED.into());
    }
    Ok(event)
}

/// `(year, month, day)` of a day counted from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil(days: i64) -> (u32, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let c = |v: i64| u32::try_from(v).unwrap_or(0);
    (c(y), c(m), c(d))
}

fn has(mask: u64, v: u32) -> bool {
    mask & (1 << v) != 0
}

impl Event {
    /// The first time after `after` (seconds since the epoch, UTC) the
    /// event fires, looked for over the next ten years.
    pub fn next(&self, after: u64) -> Option<u64> {
        let after = i64::try_from(after).ok()?;
        let first_day = after.div_euclid(86_400);
        for day in first_day..first_day + 3660 {
            let (y, m, d) = civil(day);
            // 1970-01-01 was a Thursday.
            let wd = u32::try_from((day + 4).rem_euclid(7)).ok()?;
            let year_ok = self.years.as_ref().is_none_or(|runs| {
                runs.iter()
                    .any(|(a, b, s)| y >= *a && y <= *b && (y - a) % s == 0)
            });
            if !year_ok
                || !has(self.months, m)
                || !has(self.days, d)
                || self.weekdays & (1 << wd) == 0
            {
                continue;
            }
            for h in (0..24).filter(|h| has(self.hours, *h)) {
                for min in (0..60).filter(|v| has(self.minutes, *v)) {
                    for s in (0..60).filter(|v| has(self.seconds, *v)) {
                        let at = day * 86_400 + i64::from(h * 3600 + min * 60 + s);
                        if at > after {
                            return u64::try_from(at).ok();
                        }
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(event: &str, after: u64) -> u64 {
        parse(event).unwrap().next(after).unwrap()
    }

    #[test]
    fn the_common_forms_fire_when_pve_says() {
        // pve-common's calendar_event_test.pl; epoch 0 was a Thursday.
        assert_eq!(next("*", 30), 60);
        assert_eq!(next("*/10", 599), 600);
        assert_eq!(next("*/12:0", 10), 43_200);
        assert_eq!(next("Mon", 0), 4 * 86_400);
        assert_eq!(next("sat..sun", 2 * 86_400), 3 * 86_400);
        assert_eq!(next("20..22:*/30", 0), 20 * 3600);
        assert_eq!(next("daily", 0), 86_400);
        assert_eq!(next("weekly", 0), 4 * 86_400);
        assert_eq!(next("*-*-* 03:30", 0), 3 * 3600 + 30 * 60);
        assert_eq!(next("mon..fri 02:00", 86_400), 86_400 + 2 * 3600);
        assert_eq!(next("mon..fri 02:00", 2 * 86_400), 4 * 86_400 + 2 * 3600);
        assert_eq!(next("sat", 0), 2 * 86_400);
        assert_eq!(next("*/15", 0), 15 * 60);
        // 1970-02-01.
        assert_eq!(next("monthly", 0), 31 * 86_400);
        assert_eq!(next("1971-01-01 00:00", 0), 365 * 86_400);
    }

    #[test]
    fn what_pve_refuses_is_refused_with_its_text() {
        for (event, error) in [
            ("61", "value '61' out of range"),
            ("*/61", "repetition '61' out of range"),
            ("0..80", "range end '80' out of range"),
            ("Fri..Mon", "wrong order in range 'Fri..Mon'"),
            (" mon 0 0", UNUSED),
            ("", "unable to parse calendar event - event is empty"),
            ("every day", UNUSED),
            ("25:00", "value '25' out of range"),
        ] {
            assert_eq!(parse(event).unwrap_err(), error, "{event}");
        }
    }
}
