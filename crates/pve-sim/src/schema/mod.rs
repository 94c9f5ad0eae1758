//! Parameter schemas and their validation, following pve-common's
//! `PVE::JSONSchema` (`check_prop`, `check_type`, `parse_property_string`)
//! so errors carry PVE's exact texts.
//!
//! These tables are the simulator's own, hand-written definitions of the
//! subset of the API it serves; a test compares them with the real schema.

pub mod format;
pub mod propstr;
pub mod qemu;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};

use regex::Regex;

pub use format::Named;
pub use propstr::PropFormat;

use crate::http::decode::{RawParams, RawValue};
use crate::http::{ParamErrors, Params};

/// The JSON-schema type of a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Boolean,
    Integer,
    Number,
    String,
    /// A list of strings (`command` of agent exec); stored `\0`-joined.
    Array,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Boolean => "boolean",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::String => "string",
            Self::Array => "array",
        }
    }
}

/// A string format: a registered name or an inline property-string format.
#[derive(Clone, Copy, Debug)]
pub enum Format {
    Named(Named),
    Prop(&'static PropFormat),
}

/// One parameter (or one key of a property string).
#[derive(Clone, Copy, Debug)]
pub struct Param {
    /// `vmid`, or `scsi[n]` for an indexed family.
    pub name: &'static str,
    /// Number of indexes of an indexed family (`scsi0`..`scsi30` = 31); 0 otherwise.
    pub count: u16,
    pub kind: Kind,
    pub optional: bool,
    pub min: Option<i64>,
    pub max: Option<i64>,
    pub enum_values: &'static [&'static str],
    /// Anchored like PVE does: `^(?:pattern)$`.
    pub pattern: Option<&'static str>,
    pub format: Option<Format>,
    pub max_len: Option<usize>,
    /// Property strings: the key a value without `key=` belongs to.
    pub default_key: bool,
    /// Property strings: this key stores into another key.
    pub alias: Option<&'static str>,
    /// Property strings: the alias also stores its own name into this key
    /// (`virtio=MAC` sets `model=virtio`).
    pub key_alias: Option<&'static str>,
    /// Another parameter that must be present when this one is.
    pub requires: Option<&'static str>,
}

impl Param {
    pub const fn new(name: &'static str, kind: Kind) -> Self {
        Self {
            name,
            count: 0,
            kind,
            optional: false,
            min: None,
            max: None,
            enum_values: &[],
            pattern: None,
            format: None,
            max_len: None,
            default_key: false,
            alias: None,
            key_alias: None,
            requires: None,
        }
    }
    pub const fn string(name: &'static str) -> Self {
        Self::new(name, Kind::String)
    }
    pub const fn boolean(name: &'static str) -> Self {
        Self::new(name, Kind::Boolean)
    }
    pub const fn integer(name: &'static str) -> Self {
        Self::new(name, Kind::Integer)
    }
    pub const fn array(name: &'static str) -> Self {
        Self::new(name, Kind::Array)
    }
    pub const fn number(name: &'static str) -> Self {
        Self::new(name, Kind::Number)
    }
    pub const fn opt(self) -> Self {
        Self {
            optional: true,
            ..self
        }
    }
    pub const fn min(self, v: i64) -> Self {
        Self {
            min: Some(v),
            ..self
        }
    }
    pub const fn max(self, v: i64) -> Self {
        Self {
            max: Some(v),
            ..self
        }
    }
    pub const fn enums(self, v: &'static [&'static str]) -> Self {
        Self {
            enum_values: v,
            ..self
        }
    }
    pub const fn pattern(self, p: &'static str) -> Self {
        Self {
            pattern: Some(p),
            ..self
        }
    }
    pub const fn format(self, f: Named) -> Self {
        Self {
            format: Some(Format::Named(f)),
            ..self
        }
    }
    pub const fn prop(self, f: &'static PropFormat) -> Self {
        Self {
            format: Some(Format::Prop(f)),
            ..self
        }
    }
    pub const fn max_len(self, n: usize) -> Self {
        Self {
            max_len: Some(n),
            ..self
        }
    }
    pub const fn indexed(self, count: u16) -> Self {
        Self { count, ..self }
    }
    pub const fn requires(self, other: &'static str) -> Self {
        Self {
            requires: Some(other),
            ..self
        }
    }
    pub const fn default_key(self) -> Self {
        Self {
            default_key: true,
            ..self
        }
    }
    /// A property-string key that is an alias of `target`.
    pub const fn alias(name: &'static str, target: &'static str) -> Self {
        Self {
            alias: Some(target),
            ..Self::string(name).opt()
        }
    }
    /// `model=MAC` style alias: stores the value in `target` and the key in `key_alias`.
    pub const fn key_alias(
        name: &'static str,
        target: &'static str,
        key_alias: &'static str,
    ) -> Self {
        Self {
            key_alias: Some(key_alias),
            ..Self::alias(name, target)
        }
    }

    /// Does a concrete key (`scsi3`) belong to this parameter?
    pub fn matches(&self, key: &str) -> bool {
        match self.name.strip_suffix("[n]") {
            Some(base) if self.count > 0 => key
                .strip_prefix(base)
                .filter(|idx| {
                    !idx.is_empty()
                        && idx.bytes().all(|b| b.is_ascii_digit())
                        && (idx.len() == 1 || !idx.starts_with('0'))
                })
                .and_then(|idx| idx.parse::<u16>().ok())
                .is_some_and(|i| i < self.count),
            _ => self.name == key,
        }
    }
}

/// Finds the parameter a concrete key belongs to.
pub fn find<'a>(mut params: impl Iterator<Item = &'a Param>, key: &str) -> Option<&'a Param> {
    params.find(|p| p.matches(key))
}

/// Validates raw parameters against a schema the way PVE's `validate` does.
pub fn validate<'a>(
    params: impl Iterator<Item = &'a Param> + Clone,
    raw: &RawParams,
) -> Result<Params, ParamErrors> {
    let mut errors = ParamErrors::new();
    let mut out = BTreeMap::new();
    for (key, value) in raw {
        match find(params.clone(), key) {
            None => {
                errors.insert(key.clone(), "property is not defined in schema and the schema does not allow additional properties".into());
            }
            Some(spec) => match check_value(key, spec, value) {
                Ok(v) => {
                    out.insert(key.clone(), v);
                }
                Err(msg) => {
                    errors.insert(key.clone(), msg);
                }
            },
        }
    }
    for spec in params {
        if !spec.optional && spec.count == 0 && !raw.contains_key(spec.name) {
            errors.insert(
                spec.name.to_owned(),
                "property is missing and it is not optional".into(),
            );
        }
        if let Some(required) = spec
            .requires
            .filter(|r| raw.contains_key(spec.name) && !raw.contains_key(*r))
        {
            errors.insert(
                required.to_owned(),
                format!("missing property - '{}' requires this property", spec.name),
            );
        }
    }
    if errors.is_empty() {
        Ok(Params(out))
    } else {
        Err(errors)
    }
}

/// Checks one value: type, format, pattern, length, range, enum (PVE's order).
/// Returns the normalized string.
pub fn check_value(path: &str, spec: &Param, value: &RawValue) -> Result<String, String> {
    let ty = spec.kind.name();
    let text = match (spec.kind, value) {
        (Kind::Array, RawValue::List(items)) => return Ok(items.join("\0")),
        (Kind::Array, RawValue::Text(t)) => return Ok(t.clone()),
        (_, RawValue::List(items)) => {
            // A repeated scalar parameter: the last value wins.
            let last = RawValue::Text(items.last().cloned().unwrap_or_default());
            return check_value(path, spec, &last);
        }
        (Kind::Boolean, RawValue::Bool(b)) => return Ok(if *b { "1" } else { "0" }.to_owned()),
        (Kind::Boolean, RawValue::Text(t)) if t == "1" || t == "0" => return Ok(t.clone()),
        (_, RawValue::Bool(_)) => {
            return Err(format!(
                "type check ('{ty}') failed - got JSON::PP::Boolean"
            ));
        }
        (_, RawValue::Structured(kind)) => {
            return Err(format!("type check ('{ty}') failed - got {kind}"));
        }
        (Kind::Boolean, RawValue::Text(t)) => {
            return Err(format!("type check ('{ty}') failed - got '{t}'"));
        }
        (Kind::Integer, RawValue::Text(t)) if !is_integer(t) => {
            return Err(format!("type check ('{ty}') failed - got '{t}'"));
        }
        (Kind::Number, RawValue::Text(t)) if !is_number(t) => {
            return Err(format!("type check ('{ty}') failed - got '{t}'"));
        }
        (_, RawValue::Text(t)) => t.clone(),
    };
    check_text(path, spec, &text)?;
    Ok(text)
}

/// The checks after the type check, for a value known to have the right type.
pub fn check_text(path: &str, spec: &Param, text: &str) -> Result<(), String> {
    match spec.format {
        Some(Format::Named(f)) => f
            .check(path, text)
            .map_err(|e| format!("invalid format - {e}"))?,
        Some(Format::Prop(f)) => {
            f.parse(path, text)
                .map_err(|e| format!("invalid format - {e}"))?;
        }
        None => {}
    }
    if let Some(p) = spec.pattern
        && !regex_matches(p, text)
    {
        return Err("value does not match the regex pattern".into());
    }
    if let Some(max) = spec.max_len
        && text.chars().count() > max
    {
        return Err(format!("value may only be {max} characters long"));
    }
    if is_number(text) {
        let v: f64 = text.parse().unwrap_or_default();
        if let Some(max) = spec.max.filter(|m| v > *m as f64) {
            return Err(format!("value must have a maximum value of {max}"));
        }
        if let Some(min) = spec.min.filter(|m| v < *m as f64) {
            return Err(format!("value must have a minimum value of {min}"));
        }
    }
    if !spec.enum_values.is_empty() && !spec.enum_values.contains(&text) {
        return Err(format!(
            "value '{text}' does not have a value in the enumeration '{}'",
            spec.enum_values.join(", ")
        ));
    }
    Ok(())
}

pub fn is_integer(v: &str) -> bool {
    let digits = v.strip_prefix(['+', '-']).unwrap_or(v);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

pub fn is_number(v: &str) -> bool {
    regex_matches(r"[+-]?(\d+\.\d+|\d+\.|\.\d+|\d+)([eE][+-]?\d+)?", v)
}

/// Anchored regex match with a process-wide cache of compiled patterns.
pub fn regex_matches(pattern: &'static str, text: &str) -> bool {
    static CACHE: OnceLock<Mutex<HashMap<&'static str, Regex>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let re = cache.entry(pattern).or_insert_with(|| {
        // Our patterns are literals written for this crate; a bad one is a bug
        // that every test exercising it would catch.
        Regex::new(&format!("^(?:{pattern})$"))
            .unwrap_or_else(|e| panic!("invalid built-in pattern {pattern}: {e}"))
    });
    re.is_match(text)
}

#[cfg(test)]
mod prop_tests;

#[cfg(test)]
mod tests {
    use super::*;

    const VMID: Param = Param::integer("vmid")
        .format(Named::PveVmid)
        .min(100)
        .max(999_999_999);
    const FLAG: Param = Param::boolean("full").opt();
    const SCSI: Param = Param::string("scsi[n]").indexed(31).opt();

    fn raw(pairs: &[(&str, &str)]) -> RawParams {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), RawValue::Text((*v).to_owned())))
            .collect()
    }

    #[test]
    fn errors_use_pve_texts() {
        let specs = [VMID, FLAG];
        let err = validate(
            specs.iter(),
            &raw(&[("vmid", "abc"), ("full", "true"), ("x", "1")]),
        )
        .unwrap_err();
        assert_eq!(err["vmid"], "type check ('integer') failed - got 'abc'");
        assert_eq!(err["full"], "type check ('boolean') failed - got 'true'");
        assert_eq!(
            err["x"],
            "property is not defined in schema and the schema does not allow additional properties"
        );
        let err = validate(specs.iter(), &raw(&[("vmid", "99")])).unwrap_err();
        assert_eq!(
            err["vmid"],
            "invalid format - value does not look like a valid VM ID\n"
        );
        let err = validate(specs.iter(), &raw(&[])).unwrap_err();
        assert_eq!(err["vmid"], "property is missing and it is not optional");
    }

    /// `regex_matches` panics on a bad built-in pattern; prove there is none.
    #[test]
    fn all_builtin_patterns_compile() {
        fn visit(p: &Param, n: &mut usize) {
            if let Some(pattern) = p.pattern {
                Regex::new(&format!("^(?:{pattern})$")).unwrap();
                *n += 1;
            }
            if let Some(Format::Prop(f)) = p.format {
                f.keys.iter().for_each(|k| visit(k, n));
            }
        }
        let mut n = 0;
        for route in crate::api::routes() {
            route.params().for_each(|p| visit(p, &mut n));
        }
        for f in [
            &propstr::IPCONFIG,
            &propstr::BOOT,
            &propstr::CICUSTOM,
            &propstr::CPU,
            &propstr::SMBIOS1,
        ] {
            f.keys.iter().for_each(|k| visit(k, &mut n));
        }
        assert!(n > 10, "patterns checked: {n}");
    }

    #[test]
    fn indexed_names_match_within_range() {
        assert!(SCSI.matches("scsi0") && SCSI.matches("scsi30"));
        assert!(!SCSI.matches("scsi31") && !SCSI.matches("scsi") && !SCSI.matches("scsi01"));
    }
}
