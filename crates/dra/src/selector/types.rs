//! The types the selector checker reasons with, and how cel-go's checker
//! unifies them (`checker/types.go`): type parameters bound through a
//! substitution map, `dyn` and `any` assignable both ways, the legacy
//! nullable types, the "most general" of two compatible types.

use std::collections::HashMap;
use std::fmt;

/// A CEL type as the checker sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    Duration,
    Timestamp,
    /// Any type, checked at runtime.
    Dyn,
    /// `google.protobuf.Any`: assignable like `dyn`, but not iterable nor
    /// selectable by comprehension (the attribute values of 1.34 and 1.35).
    Any,
    /// The type of an expression that failed to check; assignable like `dyn`
    /// so that one error does not cascade.
    Error,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    /// `type` (no parameter) or `type(T)`.
    Type(Option<Box<Ty>>),
    /// An opaque type with parameters: `optional_type(T)`, `net.IP`, and the
    /// `function(result, args...)` of overload resolution.
    Opaque(String, Vec<Ty>),
    /// An object type: `kubernetes.DRADevice`, `kubernetes.Quantity`, ...
    Struct(String),
    /// A type parameter: an overload's `A`, `K`, `V`, or a checker variable.
    Param(String),
}

/// The kinds cel-go compares before comparing names and parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    Duration,
    Timestamp,
    Dyn,
    Any,
    Error,
    List,
    Map,
    Type,
    Opaque,
    Struct,
    Param,
}

impl Ty {
    pub(crate) fn list(elem: Ty) -> Ty {
        Ty::List(Box::new(elem))
    }

    pub(crate) fn map(key: Ty, value: Ty) -> Ty {
        Ty::Map(Box::new(key), Box::new(value))
    }

    pub(crate) fn optional(inner: Ty) -> Ty {
        Ty::Opaque("optional_type".to_owned(), vec![inner])
    }

    fn kind(&self) -> Kind {
        match self {
            Ty::Bool => Kind::Bool,
            Ty::Int => Kind::Int,
            Ty::Uint => Kind::Uint,
            Ty::Double => Kind::Double,
            Ty::String => Kind::String,
            Ty::Bytes => Kind::Bytes,
            Ty::Null => Kind::Null,
            Ty::Duration => Kind::Duration,
            Ty::Timestamp => Kind::Timestamp,
            Ty::Dyn => Kind::Dyn,
            Ty::Any => Kind::Any,
            Ty::Error => Kind::Error,
            Ty::List(_) => Kind::List,
            Ty::Map(..) => Kind::Map,
            Ty::Type(_) => Kind::Type,
            Ty::Opaque(..) => Kind::Opaque,
            Ty::Struct(_) => Kind::Struct,
            Ty::Param(_) => Kind::Param,
        }
    }

    fn name(&self) -> &str {
        match self {
            Ty::Bool => "bool",
            Ty::Int => "int",
            Ty::Uint => "uint",
            Ty::Double => "double",
            Ty::String => "string",
            Ty::Bytes => "bytes",
            Ty::Null => "null_type",
            Ty::Duration => "google.protobuf.Duration",
            Ty::Timestamp => "google.protobuf.Timestamp",
            Ty::Dyn => "dyn",
            Ty::Any => "google.protobuf.Any",
            Ty::Error => "*error*",
            Ty::List(_) => "list",
            Ty::Map(..) => "map",
            Ty::Type(_) => "type",
            Ty::Opaque(name, _) | Ty::Struct(name) | Ty::Param(name) => name,
        }
    }

    fn params(&self) -> Vec<&Ty> {
        match self {
            Ty::List(e) => vec![e],
            Ty::Map(k, v) => vec![k, v],
            Ty::Type(Some(t)) => vec![t],
            Ty::Opaque(_, params) => params.iter().collect(),
            _ => Vec::new(),
        }
    }

    /// `dyn` or `any` (cel-go's checker `isDyn`).
    pub(crate) fn is_dyn(&self) -> bool {
        matches!(self, Ty::Dyn | Ty::Any)
    }

    pub(crate) fn is_dyn_or_error(&self) -> bool {
        matches!(self, Ty::Dyn | Ty::Any | Ty::Error)
    }

    /// The inner type of `optional_type(T)`.
    pub(crate) fn unwrap_optional(&self) -> Option<&Ty> {
        match self {
            Ty::Opaque(name, params) if name == "optional_type" && params.len() == 1 => Some(&params[0]),
            _ => None,
        }
    }

    /// Same kind, name and parameters; type parameters compared by name
    /// unless `ignore_param_names` (cel-go's `IsExactType` and
    /// `IsEquivalentType`).
    fn same(&self, other: &Ty, ignore_param_names: bool) -> bool {
        if self.kind() != other.kind() {
            return false;
        }
        let (a, b) = (self.params(), other.params());
        if a.len() != b.len() {
            return false;
        }
        if !(ignore_param_names && self.kind() == Kind::Param) && self.name() != other.name() {
            return false;
        }
        a.iter().zip(&b).all(|(x, y)| x.same(y, ignore_param_names))
    }

    pub(crate) fn is_exact(&self, other: &Ty) -> bool {
        self.same(other, false)
    }

    pub(crate) fn is_equivalent(&self, other: &Ty) -> bool {
        self.same(other, true)
    }

    /// cel-go's `Type.IsAssignableType` (`defaultIsAssignableType`).
    fn accepts(&self, from: &Ty) -> bool {
        if matches!(self.kind(), Kind::Dyn | Kind::Any | Kind::Param) {
            return true;
        }
        let (a, b) = (self.params(), from.params());
        self.kind() == from.kind()
            && self.name() == from.name()
            && a.len() == b.len()
            && a.iter().zip(&b).all(|(x, y)| x.accepts(y))
    }

    fn is_legacy_nullable(&self) -> bool {
        matches!(
            self,
            Ty::Opaque(..) | Ty::Struct(_) | Ty::Any | Ty::Duration | Ty::Timestamp
        )
    }
}

/// The type as cel-go's `FormatCELType` prints it, for error messages.
impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Any => f.write_str("any"),
            Ty::Duration => f.write_str("duration"),
            Ty::Timestamp => f.write_str("timestamp"),
            Ty::Null => f.write_str("null"),
            Ty::Error => f.write_str("!error!"),
            Ty::Type(None) => f.write_str("type"),
            _ => {
                let params = self.params();
                f.write_str(self.name())?;
                if !params.is_empty() {
                    f.write_str("(")?;
                    for (i, p) in params.iter().enumerate() {
                        if i > 0 {
                            f.write_str(", ")?;
                        }
                        write!(f, "{p}")?;
                    }
                    f.write_str(")")?;
                }
                Ok(())
            }
        }
    }
}

/// Type parameter bindings, by parameter name.
#[derive(Clone, Debug, Default)]
pub(crate) struct Mapping(HashMap<String, Ty>);

impl Mapping {
    fn find(&self, t: &Ty) -> Option<&Ty> {
        match t {
            Ty::Param(name) => self.0.get(name),
            _ => None,
        }
    }

    /// Binds the type parameter `name` to `to`.
    pub(crate) fn bind(&mut self, name: &str, to: Ty) {
        self.0.insert(name.to_owned(), to);
    }

    fn add(&mut self, param: &Ty, to: Ty) {
        if let Ty::Param(name) = param {
            self.0.insert(name.clone(), to);
        }
    }

    /// `t` with bound parameters replaced, and the unbound ones by `dyn` if
    /// `param_to_dyn` (cel-go's `substitute`).
    pub(crate) fn substitute(&self, t: &Ty, param_to_dyn: bool) -> Ty {
        if let Some(sub) = self.find(t) {
            return self.substitute(&sub.clone(), param_to_dyn);
        }
        match t {
            Ty::Param(_) if param_to_dyn => Ty::Dyn,
            Ty::List(e) => Ty::list(self.substitute(e, param_to_dyn)),
            Ty::Map(k, v) => Ty::map(self.substitute(k, param_to_dyn), self.substitute(v, param_to_dyn)),
            Ty::Type(Some(p)) => Ty::Type(Some(Box::new(self.substitute(p, param_to_dyn)))),
            Ty::Opaque(name, params) => Ty::Opaque(
                name.clone(),
                params.iter().map(|p| self.substitute(p, param_to_dyn)).collect(),
            ),
            _ => t.clone(),
        }
    }

    /// cel-go's `isAssignable(m, t1, t2)`: whether the two types agree,
    /// binding type parameters on either side; the bindings are kept only
    /// on success. The checker passes (expected, actual) and, for calls,
    /// (argument, parameter).
    pub(crate) fn assign(&mut self, t1: &Ty, t2: &Ty) -> bool {
        let mut copy = self.clone();
        if copy.assignable(t1, t2) {
            *self = copy;
            true
        } else {
            false
        }
    }

    /// [`Mapping::assign`] for lists: the arguments' types and an overload's
    /// parameters (cel-go's `isAssignableList`).
    pub(crate) fn assign_all(&mut self, args: &[Ty], params: &[Ty]) -> bool {
        let mut copy = self.clone();
        if copy.assignable_list(args, params) {
            *self = copy;
            true
        } else {
            false
        }
    }

    fn assignable_list(&mut self, l1: &[Ty], l2: &[Ty]) -> bool {
        l1.len() == l2.len() && l1.iter().zip(l2).all(|(a, b)| self.assignable(a, b))
    }

    /// cel-go's `internalIsAssignable(m, t1, t2)`.
    fn assignable(&mut self, t1: &Ty, t2: &Ty) -> bool {
        if t2.kind() == Kind::Param {
            let (valid, has_sub) = self.valid_substitution(t1, t2);
            if valid {
                return true;
            }
            if has_sub {
                return false;
            }
        }
        if t1.kind() == Kind::Param {
            return self.valid_substitution(t2, t1).0;
        }
        if t1.is_dyn_or_error() || t2.is_dyn_or_error() {
            return true;
        }
        if *t1 == Ty::Null {
            return assignable_null(t2);
        }
        if *t2 == Ty::Null {
            return assignable_null(t1);
        }
        match t1 {
            Ty::Bool
            | Ty::Bytes
            | Ty::Double
            | Ty::Int
            | Ty::String
            | Ty::Uint
            | Ty::Any
            | Ty::Duration
            | Ty::Timestamp
            | Ty::Struct(_) => t2.accepts(t1),
            Ty::Type(_) => t2.kind() == Kind::Type,
            Ty::Opaque(..) | Ty::List(_) | Ty::Map(..) => {
                t1.kind() == t2.kind() && t1.name() == t2.name() && {
                    let (a, b) = (t1.params(), t2.params());
                    a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| self.assignable(x, y))
                }
            }
            _ => false,
        }
    }

    /// cel-go's `isValidTypeSubstitution(m, t1, t2)`: can `t1` stand for the
    /// parameter `t2`; also whether `t2` was already bound.
    fn valid_substitution(&mut self, t1: &Ty, t2: &Ty) -> (bool, bool) {
        if t1.kind() == t2.kind() && t1.is_exact(t2) {
            return (true, true);
        }
        if let Some(t2_sub) = self.find(t2).cloned() {
            if t1.kind() == t2_sub.kind() && t1.is_exact(&t2_sub) {
                return (true, true);
            }
            if self.assignable(t1, &t2_sub) {
                let t2_new = most_general(t1, &t2_sub);
                if self.not_referenced_in(t2, &t2_new) {
                    self.add(t2, t2_new);
                }
                return (true, true);
            }
            return (false, true);
        }
        if self.not_referenced_in(t2, t1) {
            self.add(t2, t1.clone());
            return (true, false);
        }
        (false, false)
    }

    fn not_referenced_in(&self, t: &Ty, within: &Ty) -> bool {
        if t.is_exact(within) {
            return false;
        }
        match within {
            Ty::Param(_) => match self.find(within) {
                Some(sub) => self.not_referenced_in(t, sub),
                None => true,
            },
            Ty::Opaque(..) | Ty::List(_) | Ty::Map(..) | Ty::Type(_) => {
                within.params().iter().all(|p| self.not_referenced_in(t, p))
            }
            _ => true,
        }
    }
}

fn assignable_null(t: &Ty) -> bool {
    t.is_legacy_nullable() || t.accepts(&Ty::Null)
}

/// The more general of two compatible types (cel-go's `mostGeneral`).
pub(crate) fn most_general(t1: &Ty, t2: &Ty) -> Ty {
    if equal_or_less_specific(t1, t2) {
        t1.clone()
    } else {
        t2.clone()
    }
}

fn equal_or_less_specific(t1: &Ty, t2: &Ty) -> bool {
    if t1.is_dyn() || t1.kind() == Kind::Param {
        return true;
    }
    if t2.is_dyn() || t2.kind() == Kind::Param {
        return false;
    }
    if t1.kind() != t2.kind() {
        return false;
    }
    match (t1, t2) {
        (Ty::Opaque(n1, p1), Ty::Opaque(n2, p2)) => {
            n1 == n2 && p1.len() == p2.len() && p1.iter().zip(p2).all(|(a, b)| equal_or_less_specific(a, b))
        }
        (Ty::List(a), Ty::List(b)) => equal_or_less_specific(a, b),
        (Ty::Map(k1, v1), Ty::Map(k2, v2)) => equal_or_less_specific(k1, k2) && equal_or_less_specific(v1, v2),
        (Ty::Type(_), Ty::Type(_)) => true,
        _ => t1.is_exact(t2),
    }
}

/// Parses a type as the declaration table writes it (cel-go's
/// `FormatCELType`): `int`, `list(A)`, `map(K, V)`, `optional_type(V)`,
/// `kubernetes.Quantity`; single capital letters are type parameters.
pub(crate) fn parse_type(text: &str) -> Result<Ty, String> {
    let text = text.trim();
    let (head, args) = match text.find('(') {
        Some(open) if text.ends_with(')') => {
            let inner = &text[open + 1..text.len() - 1];
            (&text[..open], split_top_level(inner)?)
        }
        Some(_) => return Err(format!("unbalanced type {text:?}")),
        None => (text, Vec::new()),
    };
    let args = args.iter().map(|a| parse_type(a)).collect::<Result<Vec<_>, _>>()?;
    let simple = |t: Ty| {
        if args.is_empty() {
            Ok(t)
        } else {
            Err(format!("{head} takes no parameters"))
        }
    };
    match head {
        "bool" => simple(Ty::Bool),
        "int" => simple(Ty::Int),
        "uint" => simple(Ty::Uint),
        "double" => simple(Ty::Double),
        "string" => simple(Ty::String),
        "bytes" => simple(Ty::Bytes),
        "null" => simple(Ty::Null),
        "duration" => simple(Ty::Duration),
        "timestamp" => simple(Ty::Timestamp),
        "dyn" => simple(Ty::Dyn),
        "any" => simple(Ty::Any),
        "list" => match <[Ty; 1]>::try_from(args) {
            Ok([e]) => Ok(Ty::list(e)),
            Err(_) => Err(format!("list takes one parameter: {text:?}")),
        },
        "map" => match <[Ty; 2]>::try_from(args) {
            Ok([k, v]) => Ok(Ty::map(k, v)),
            Err(_) => Err(format!("map takes two parameters: {text:?}")),
        },
        "type" => match args.len() {
            0 => Ok(Ty::Type(None)),
            1 => Ok(Ty::Type(args.into_iter().next().map(Box::new))),
            _ => Err(format!("type takes one parameter: {text:?}")),
        },
        "optional_type" => Ok(Ty::Opaque(head.to_owned(), args)),
        "net.IP" | "net.CIDR" => simple(Ty::Opaque(head.to_owned(), Vec::new())),
        name if name.len() == 1 && name.as_bytes()[0].is_ascii_uppercase() => simple(Ty::Param(name.to_owned())),
        name if name.contains('.') => simple(Ty::Struct(name.to_owned())),
        other => Err(format!("unknown type {other:?}")),
    }
}

fn split_top_level(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("unbalanced type {text:?}"))?;
            }
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if !text.trim().is_empty() {
        parts.push(&text[start..]);
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> Ty {
        parse_type(text).unwrap()
    }

    #[test]
    fn parses_and_prints_declared_types() {
        for text in [
            "int",
            "list(A)",
            "map(K, V)",
            "optional_type(list(V))",
            "kubernetes.Quantity",
            "type(A)",
            "net.IP",
            "map(string, map(string, any))",
        ] {
            assert_eq!(t(text).to_string(), text);
        }
    }

    #[test]
    fn unification_follows_cel_go() {
        // arguments (int, string) for the parameters (A, A): no
        let mut m = Mapping::default();
        assert!(!m.assign_all(&[t("int"), t("string")], &[t("A"), t("A")]));
        // (int, dyn) for (A, A): yes, and A is the more general dyn
        let mut m = Mapping::default();
        assert!(m.assign_all(&[t("int"), t("dyn")], &[t("A"), t("A")]));
        assert_eq!(m.substitute(&t("A"), true), t("dyn"));
        // (int, int) for (A, A): A is int
        let mut m = Mapping::default();
        assert!(m.assign_all(&[t("int"), t("int")], &[t("A"), t("A")]));
        assert_eq!(m.substitute(&t("A"), true), t("int"));
        // list(A) with list(any): any is dyn-like
        let mut m = Mapping::default();
        assert!(m.assign(&t("list(int)"), &t("list(any)")));
        // null goes where a struct or optional goes, not where an int does
        let mut m = Mapping::default();
        assert!(m.assign(&t("kubernetes.Quantity"), &t("null")));
        assert!(!m.assign(&t("int"), &t("null")));
    }
}
