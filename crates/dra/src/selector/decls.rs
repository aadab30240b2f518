//! The functions a selector may call: every overload of the Kubernetes DRA
//! CEL environment (the kube-scheduler's stored-expression environment of
//! k8s.io/dynamic-resource-allocation/cel, on k8s.io/apiserver's base
//! environment), with its signature as cel-go's checker reads it.
//!
//! The table lists cel-go's declarations as `dracel decls` prints them for
//! each release (function, overload id, member or global, signature;
//! functions by name, a function's overloads in declaration order, which
//! decides how type parameters bind when several fit), plus a last column:
//! `unsupported` for the functions topoalign does not evaluate (timestamps
//! and durations, IP addresses and CIDRs, URLs, named formats, the
//! authorizer, `string.format`), and the releases an overload is limited to
//! (`..1.36`, `1.36..`, `1.37`; a function whose overloads come in another
//! order in some release is listed once per order).
//! The timestamp and duration overloads of the operators and conversions
//! are kept: no supported expression makes such a value, so the only
//! argument that selects them is `null`, which fails when evaluated, as in
//! Go. The test `crates/dra/tests/selector.rs` holds the table to the Go
//! declarations of every release (`testdata/dra/cel/<release>-decls.txt`).

use std::collections::HashMap;

use super::Release;
use super::types::{Ty, parse_type};

/// One overload of a function.
#[derive(Clone, Debug)]
pub(crate) struct Overload {
    pub(crate) id: &'static str,
    pub(crate) member: bool,
    /// The argument types, the target's first for a member overload.
    pub(crate) params: Vec<Ty>,
    pub(crate) result: Ty,
    /// The type parameters the signature uses.
    pub(crate) type_params: Vec<String>,
    /// Whether topoalign evaluates it.
    pub(crate) supported: bool,
}

/// The functions of one release's environment, by name.
#[derive(Debug)]
pub(crate) struct Declarations {
    functions: HashMap<&'static str, Vec<Overload>>,
}

impl Declarations {
    /// The declarations of `release`.
    pub(crate) fn of(release: Release) -> Declarations {
        let mut functions: HashMap<&'static str, Vec<Overload>> = HashMap::new();
        for line in TABLE.lines().filter(|l| !l.trim().is_empty()) {
            let row = Row::parse(line).unwrap_or_else(|e| panic!("declaration table: {e}: {line:?}"));
            if !row.in_release(release) {
                continue;
            }
            functions.entry(row.name).or_default().push(row.overload);
        }
        Declarations { functions }
    }

    /// The overloads of `name`, if it is a function.
    pub(crate) fn function(&self, name: &str) -> Option<&[Overload]> {
        self.functions.get(name).map(Vec::as_slice)
    }

    /// The table rows of `release` as `dracel decls` prints them (function,
    /// id, member or global, signature), with whether topoalign evaluates
    /// each: what the test compares with the Go declarations.
    pub fn listing(release: Release) -> Vec<(String, bool)> {
        TABLE
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter_map(|line| {
                let row = Row::parse(line).ok()?;
                row.in_release(release).then(|| {
                    let text = line.split('\t').take(4).collect::<Vec<_>>().join("\t");
                    (text, row.overload.supported)
                })
            })
            .collect()
    }
}

struct Row {
    name: &'static str,
    overload: Overload,
    /// The first and last releases the overload is in.
    since: Option<Release>,
    until: Option<Release>,
}

impl Row {
    fn parse(line: &'static str) -> Result<Row, String> {
        let cols: Vec<&'static str> = line.split('\t').collect();
        let [name, id, kind, signature, rest @ ..] = cols.as_slice() else {
            return Err("expected 4 or 5 columns".to_owned());
        };
        let member = match *kind {
            "member" => true,
            "global" => false,
            other => return Err(format!("not member or global: {other:?}")),
        };
        let (args, result) = signature
            .split_once(" -> ")
            .ok_or_else(|| "no result type".to_owned())?;
        let args = args
            .strip_prefix('(')
            .and_then(|a| a.strip_suffix(')'))
            .ok_or_else(|| "arguments not in parentheses".to_owned())?;
        let params = if args.trim().is_empty() {
            Vec::new()
        } else {
            split_args(args)?
        };
        let result = parse_type(result)?;
        let mut type_params = Vec::new();
        for t in params.iter().chain(std::iter::once(&result)) {
            collect_params(t, &mut type_params);
        }
        let (mut supported, mut since, mut until) = (true, None, None);
        for flag in rest.iter().flat_map(|r| r.split_whitespace()) {
            match flag {
                "unsupported" => supported = false,
                // `..1.36`: up to 1.36; `1.36..`: from 1.36; `1.36`: only 1.36
                f => {
                    let release = |r: &str| Release::parse(r).ok_or(format!("release {f:?}"));
                    match (f.strip_prefix(".."), f.strip_suffix("..")) {
                        (Some(last), _) => until = Some(release(last)?),
                        (_, Some(first)) => since = Some(release(first)?),
                        _ => {
                            since = Some(release(f)?);
                            until = since;
                        }
                    }
                }
            }
        }
        Ok(Row {
            name,
            overload: Overload {
                id,
                member,
                params,
                result,
                type_params,
                supported,
            },
            since,
            until,
        })
    }

    fn in_release(&self, release: Release) -> bool {
        self.since.is_none_or(|s| release >= s) && self.until.is_none_or(|u| release <= u)
    }
}

fn split_args(args: &str) -> Result<Vec<Ty>, String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in args.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(parse_type(&args[start..i])?);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(parse_type(&args[start..])?);
    Ok(out)
}

fn collect_params(t: &Ty, out: &mut Vec<String>) {
    match t {
        Ty::Param(name) if !out.contains(name) => out.push(name.clone()),
        Ty::List(e) => collect_params(e, out),
        Ty::Map(k, v) => {
            collect_params(k, out);
            collect_params(v, out);
        }
        Ty::Type(Some(p)) => collect_params(p, out),
        Ty::Opaque(_, ps) => ps.iter().for_each(|p| collect_params(p, out)),
        _ => {}
    }
}

/// Function, overload id, member or global, signature, flags.
const TABLE: &str = r#"
!_	logical_not	global	(bool) -> bool
-_	negate_double	global	(double) -> double
-_	negate_int64	global	(int) -> int
@in	in_list	global	(A, list(A)) -> bool
@in	in_map	global	(A, map(A, B)) -> bool
@not_strictly_false	not_strictly_false	global	(bool) -> bool
@sortByAssociatedKeys	list_int_sortByAssociatedKeys	member	(list(T), list(int)) -> list(T)
@sortByAssociatedKeys	list_uint_sortByAssociatedKeys	member	(list(T), list(uint)) -> list(T)
@sortByAssociatedKeys	list_double_sortByAssociatedKeys	member	(list(T), list(double)) -> list(T)
@sortByAssociatedKeys	list_bool_sortByAssociatedKeys	member	(list(T), list(bool)) -> list(T)
@sortByAssociatedKeys	list_google.protobuf.Duration_sortByAssociatedKeys	member	(list(T), list(duration)) -> list(T)
@sortByAssociatedKeys	list_google.protobuf.Timestamp_sortByAssociatedKeys	member	(list(T), list(timestamp)) -> list(T)
@sortByAssociatedKeys	list_string_sortByAssociatedKeys	member	(list(T), list(string)) -> list(T)
@sortByAssociatedKeys	list_bytes_sortByAssociatedKeys	member	(list(T), list(bytes)) -> list(T)
_!=_	not_equals	global	(A, A) -> bool
_%_	modulo_int64	global	(int, int) -> int
_%_	modulo_uint64	global	(uint, uint) -> uint
_&&_	logical_and	global	(bool, bool) -> bool
_*_	multiply_double	global	(double, double) -> double
_*_	multiply_int64	global	(int, int) -> int
_*_	multiply_uint64	global	(uint, uint) -> uint
_+_	add_bytes	global	(bytes, bytes) -> bytes
_+_	add_double	global	(double, double) -> double
_+_	add_duration_duration	global	(duration, duration) -> duration
_+_	add_duration_timestamp	global	(duration, timestamp) -> timestamp
_+_	add_timestamp_duration	global	(timestamp, duration) -> timestamp
_+_	add_int64	global	(int, int) -> int
_+_	add_list	global	(list(A), list(A)) -> list(A)
_+_	add_string	global	(string, string) -> string
_+_	add_uint64	global	(uint, uint) -> uint
_-_	subtract_double	global	(double, double) -> double
_-_	subtract_duration_duration	global	(duration, duration) -> duration
_-_	subtract_int64	global	(int, int) -> int
_-_	subtract_timestamp_duration	global	(timestamp, duration) -> timestamp
_-_	subtract_timestamp_timestamp	global	(timestamp, timestamp) -> duration
_-_	subtract_uint64	global	(uint, uint) -> uint
_/_	divide_double	global	(double, double) -> double
_/_	divide_int64	global	(int, int) -> int
_/_	divide_uint64	global	(uint, uint) -> uint
_<=_	less_equals_bool	global	(bool, bool) -> bool
_<=_	less_equals_int64	global	(int, int) -> bool
_<=_	less_equals_int64_double	global	(int, double) -> bool
_<=_	less_equals_int64_uint64	global	(int, uint) -> bool
_<=_	less_equals_uint64	global	(uint, uint) -> bool
_<=_	less_equals_uint64_double	global	(uint, double) -> bool
_<=_	less_equals_uint64_int64	global	(uint, int) -> bool
_<=_	less_equals_double	global	(double, double) -> bool
_<=_	less_equals_double_int64	global	(double, int) -> bool
_<=_	less_equals_double_uint64	global	(double, uint) -> bool
_<=_	less_equals_string	global	(string, string) -> bool
_<=_	less_equals_bytes	global	(bytes, bytes) -> bool
_<=_	less_equals_timestamp	global	(timestamp, timestamp) -> bool
_<=_	less_equals_duration	global	(duration, duration) -> bool
_<_	less_bool	global	(bool, bool) -> bool
_<_	less_int64	global	(int, int) -> bool
_<_	less_int64_double	global	(int, double) -> bool
_<_	less_int64_uint64	global	(int, uint) -> bool
_<_	less_uint64	global	(uint, uint) -> bool
_<_	less_uint64_double	global	(uint, double) -> bool
_<_	less_uint64_int64	global	(uint, int) -> bool
_<_	less_double	global	(double, double) -> bool
_<_	less_double_int64	global	(double, int) -> bool
_<_	less_double_uint64	global	(double, uint) -> bool
_<_	less_string	global	(string, string) -> bool
_<_	less_bytes	global	(bytes, bytes) -> bool
_<_	less_timestamp	global	(timestamp, timestamp) -> bool
_<_	less_duration	global	(duration, duration) -> bool
_==_	equals	global	(A, A) -> bool
_>=_	greater_equals_bool	global	(bool, bool) -> bool
_>=_	greater_equals_int64	global	(int, int) -> bool
_>=_	greater_equals_int64_double	global	(int, double) -> bool
_>=_	greater_equals_int64_uint64	global	(int, uint) -> bool
_>=_	greater_equals_uint64	global	(uint, uint) -> bool
_>=_	greater_equals_uint64_double	global	(uint, double) -> bool
_>=_	greater_equals_uint64_int64	global	(uint, int) -> bool
_>=_	greater_equals_double	global	(double, double) -> bool
_>=_	greater_equals_double_int64	global	(double, int) -> bool
_>=_	greater_equals_double_uint64	global	(double, uint) -> bool
_>=_	greater_equals_string	global	(string, string) -> bool
_>=_	greater_equals_bytes	global	(bytes, bytes) -> bool
_>=_	greater_equals_timestamp	global	(timestamp, timestamp) -> bool
_>=_	greater_equals_duration	global	(duration, duration) -> bool
_>_	greater_bool	global	(bool, bool) -> bool
_>_	greater_int64	global	(int, int) -> bool
_>_	greater_int64_double	global	(int, double) -> bool
_>_	greater_int64_uint64	global	(int, uint) -> bool
_>_	greater_uint64	global	(uint, uint) -> bool
_>_	greater_uint64_double	global	(uint, double) -> bool
_>_	greater_uint64_int64	global	(uint, int) -> bool
_>_	greater_double	global	(double, double) -> bool
_>_	greater_double_int64	global	(double, int) -> bool
_>_	greater_double_uint64	global	(double, uint) -> bool
_>_	greater_string	global	(string, string) -> bool
_>_	greater_bytes	global	(bytes, bytes) -> bool
_>_	greater_timestamp	global	(timestamp, timestamp) -> bool
_>_	greater_duration	global	(duration, duration) -> bool
_?._	select_optional_field	global	(dyn, string) -> optional_type(V)
_?_:_	conditional	global	(bool, A, A) -> A
_[?_]	list_optindex_optional_int	global	(list(V), int) -> optional_type(V)
_[?_]	optional_list_optindex_optional_int	global	(optional_type(list(V)), int) -> optional_type(V)
_[?_]	map_optindex_optional_value	global	(map(K, V), K) -> optional_type(V)
_[?_]	optional_map_optindex_optional_value	global	(optional_type(map(K, V)), K) -> optional_type(V)
_[_]	index_list	global	(list(A), int) -> A
_[_]	index_map	global	(map(A, B), A) -> B
_[_]	optional_list_index_int	global	(optional_type(list(V)), int) -> optional_type(V)
_[_]	optional_map_index_value	global	(optional_type(map(K, V)), K) -> optional_type(V)
__not_strictly_false__	__not_strictly_false__	global	(bool) -> bool
_in_	in_list	global	(A, list(A)) -> bool
_in_	in_map	global	(A, map(A, B)) -> bool
_||_	logical_or	global	(bool, bool) -> bool
add	quantity_add	member	(kubernetes.Quantity, kubernetes.Quantity) -> kubernetes.Quantity
add	quantity_add_int	member	(kubernetes.Quantity, int) -> kubernetes.Quantity
allowed	decision_allowed	member	(kubernetes.authorization.Decision) -> bool	unsupported
asApproximateFloat	quantity_get_float	member	(kubernetes.Quantity) -> double
asInteger	quantity_get_int	member	(kubernetes.Quantity) -> int
bool	bool_to_bool	global	(bool) -> bool
bool	string_to_bool	global	(string) -> bool
bytes	bytes_to_bytes	global	(bytes) -> bytes
bytes	string_to_bytes	global	(string) -> bytes
cel.@mapInsert	@mapInsert_map_key_value	global	(map(K, V), K, V) -> map(K, V)	unsupported
cel.@mapInsert	@mapInsert_map_map	global	(map(K, V), map(K, V)) -> map(K, V)	unsupported
charAt	string_char_at_int	member	(string, int) -> string
check	pathcheck_check	member	(kubernetes.authorization.PathCheck, string) -> kubernetes.authorization.Decision	unsupported
check	resourcecheck_check	member	(kubernetes.authorization.ResourceCheck, string) -> kubernetes.authorization.Decision	unsupported
cidr	string_to_cidr	global	(string) -> net.CIDR	unsupported
compareTo	quantity_compare_to	member	(kubernetes.Quantity, kubernetes.Quantity) -> int
compareTo	semver_compare_to	member	(kubernetes.Semver, kubernetes.Semver) -> int
contains	contains_string	member	(string, string) -> bool
containsCIDR	cidr_contains_cidr_string	member	(net.CIDR, string) -> bool	unsupported
containsCIDR	cidr_contains_cidr	member	(net.CIDR, net.CIDR) -> bool	unsupported
containsIP	cidr_contains_ip_string	member	(net.CIDR, string) -> bool	unsupported
containsIP	cidr_contains_ip_ip	member	(net.CIDR, net.IP) -> bool	unsupported
distinct	list_distinct	member	(list(T)) -> list(T)
double	double_to_double	global	(double) -> double
double	int64_to_double	global	(int) -> double
double	string_to_double	global	(string) -> double
double	uint64_to_double	global	(uint) -> double
duration	duration_to_duration	global	(duration) -> duration	unsupported ..1.36
duration	int64_to_duration	global	(int) -> duration	unsupported ..1.36
duration	string_to_duration	global	(string) -> duration	unsupported ..1.36
duration	duration_to_duration	global	(duration) -> duration	unsupported 1.37
duration	string_to_duration	global	(string) -> duration	unsupported 1.37
dyn	to_dyn	global	(A) -> dyn
endsWith	ends_with_string	member	(string, string) -> bool
error	decision_error	member	(kubernetes.authorization.Decision) -> string	unsupported
errored	decision_errored	member	(kubernetes.authorization.Decision) -> bool	unsupported
family	ip_family	member	(net.IP) -> int	unsupported
fieldSelector	authorizer_fieldselector	member	(kubernetes.authorization.ResourceCheck, string) -> kubernetes.authorization.ResourceCheck	unsupported
find	string_find_string	member	(string, string) -> string
findAll	string_find_all_string	member	(string, string) -> list(string)
findAll	string_find_all_string_int	member	(string, string, int) -> list(string)
first	list_first	member	(list(V)) -> optional_type(V)
flatten	list_flatten	member	(list(list(T))) -> list(T)
flatten	list_flatten_int	member	(list(dyn), int) -> list(dyn)
format	string_format	member	(string, list(dyn)) -> string	unsupported
format.byte	format.byte	global	() -> kubernetes.NamedFormat	unsupported
format.date	format.date	global	() -> kubernetes.NamedFormat	unsupported
format.datetime	format.datetime	global	() -> kubernetes.NamedFormat	unsupported
format.dns1035Label	format.dns1035Label	global	() -> kubernetes.NamedFormat	unsupported
format.dns1035LabelPrefix	format.dns1035LabelPrefix	global	() -> kubernetes.NamedFormat	unsupported
format.dns1123Label	format.dns1123Label	global	() -> kubernetes.NamedFormat	unsupported
format.dns1123LabelPrefix	format.dns1123LabelPrefix	global	() -> kubernetes.NamedFormat	unsupported
format.dns1123Subdomain	format.dns1123Subdomain	global	() -> kubernetes.NamedFormat	unsupported
format.dns1123SubdomainPrefix	format.dns1123SubdomainPrefix	global	() -> kubernetes.NamedFormat	unsupported
format.labelValue	format.labelValue	global	() -> kubernetes.NamedFormat	unsupported
format.named	format-named	global	(string) -> optional_type(kubernetes.NamedFormat)	unsupported
format.qualifiedName	format.qualifiedName	global	() -> kubernetes.NamedFormat	unsupported
format.uri	format.uri	global	() -> kubernetes.NamedFormat	unsupported
format.uuid	format.uuid	global	() -> kubernetes.NamedFormat	unsupported
getDate	timestamp_to_day_of_month_1_based	member	(timestamp) -> int	unsupported
getDate	timestamp_to_day_of_month_1_based_with_tz	member	(timestamp, string) -> int	unsupported
getDayOfMonth	timestamp_to_day_of_month	member	(timestamp) -> int	unsupported
getDayOfMonth	timestamp_to_day_of_month_with_tz	member	(timestamp, string) -> int	unsupported
getDayOfWeek	timestamp_to_day_of_week	member	(timestamp) -> int	unsupported
getDayOfWeek	timestamp_to_day_of_week_with_tz	member	(timestamp, string) -> int	unsupported
getDayOfYear	timestamp_to_day_of_year	member	(timestamp) -> int	unsupported
getDayOfYear	timestamp_to_day_of_year_with_tz	member	(timestamp, string) -> int	unsupported
getEscapedPath	url_get_escaped_path	member	(kubernetes.URL) -> string	unsupported
getFullYear	timestamp_to_year	member	(timestamp) -> int	unsupported
getFullYear	timestamp_to_year_with_tz	member	(timestamp, string) -> int	unsupported
getHost	url_get_host	member	(kubernetes.URL) -> string	unsupported
getHostname	url_get_hostname	member	(kubernetes.URL) -> string	unsupported
getHours	timestamp_to_hours	member	(timestamp) -> int	unsupported
getHours	timestamp_to_hours_with_tz	member	(timestamp, string) -> int	unsupported
getHours	duration_to_hours	member	(duration) -> int	unsupported
getMilliseconds	timestamp_to_milliseconds	member	(timestamp) -> int	unsupported
getMilliseconds	timestamp_to_milliseconds_with_tz	member	(timestamp, string) -> int	unsupported
getMilliseconds	duration_to_milliseconds	member	(duration) -> int	unsupported
getMinutes	timestamp_to_minutes	member	(timestamp) -> int	unsupported
getMinutes	timestamp_to_minutes_with_tz	member	(timestamp, string) -> int	unsupported
getMinutes	duration_to_minutes	member	(duration) -> int	unsupported
getMonth	timestamp_to_month	member	(timestamp) -> int	unsupported
getMonth	timestamp_to_month_with_tz	member	(timestamp, string) -> int	unsupported
getPort	url_get_port	member	(kubernetes.URL) -> string	unsupported
getQuery	url_get_query	member	(kubernetes.URL) -> map(string, list(string))	unsupported
getScheme	url_get_scheme	member	(kubernetes.URL) -> string	unsupported
getSeconds	timestamp_to_seconds	member	(timestamp) -> int	unsupported
getSeconds	timestamp_to_seconds_tz	member	(timestamp, string) -> int	unsupported
getSeconds	duration_to_seconds	member	(duration) -> int	unsupported
group	authorizer_group	member	(kubernetes.authorization.Authorizer, string) -> kubernetes.authorization.GroupCheck	unsupported
hasValue	optional_hasValue	member	(optional_type(V)) -> bool
in	in_list	global	(A, list(A)) -> bool
in	in_map	global	(A, map(A, B)) -> bool
includes	dra_includes_dyn_dyn	member	(dyn, dyn) -> bool	1.36
includes	list_includes_dyn_dyn	member	(dyn, dyn) -> bool	1.37
indexOf	list_a_index_of_int	member	(list(A), A) -> int	..1.36
indexOf	string_index_of_string	member	(string, string) -> int	..1.36
indexOf	string_index_of_string_int	member	(string, string, int) -> int	..1.36
indexOf	string_index_of_string	member	(string, string) -> int	1.37
indexOf	string_index_of_string_int	member	(string, string, int) -> int	1.37
indexOf	list_a_index_of_int	member	(list(A), A) -> int	1.37
int	int64_to_int64	global	(int) -> int
int	double_to_int64	global	(double) -> int
int	duration_to_int64	global	(duration) -> int
int	string_to_int64	global	(string) -> int
int	timestamp_to_int64	global	(timestamp) -> int
int	uint64_to_int64	global	(uint) -> int
ip	string_to_ip	global	(string) -> net.IP	unsupported
ip	cidr_ip	member	(net.CIDR) -> net.IP	unsupported
ip.isCanonical	ip_is_canonical	global	(string) -> bool	unsupported
isCIDR	is_cidr	global	(string) -> bool	unsupported
isGlobalUnicast	ip_is_global_unicast	member	(net.IP) -> bool	unsupported
isGreaterThan	quantity_is_greater_than	member	(kubernetes.Quantity, kubernetes.Quantity) -> bool
isGreaterThan	semver_is_greater_than	member	(kubernetes.Semver, kubernetes.Semver) -> bool
isIP	is_ip	global	(string) -> bool	unsupported
isInteger	quantity_is_integer	member	(kubernetes.Quantity) -> bool
isLessThan	quantity_is_less_than	member	(kubernetes.Quantity, kubernetes.Quantity) -> bool
isLessThan	semver_is_less_than	member	(kubernetes.Semver, kubernetes.Semver) -> bool
isLinkLocalMulticast	ip_is_link_local_multicast	member	(net.IP) -> bool	unsupported
isLinkLocalUnicast	ip_is_link_local_unicast	member	(net.IP) -> bool	unsupported
isLoopback	ip_is_loopback	member	(net.IP) -> bool	unsupported
isQuantity	is_quantity_string	global	(string) -> bool
isSemver	is_semver_string	global	(string) -> bool
isSemver	is_semver_string_bool	global	(string, bool) -> bool
isSorted	list_int_is_sorted_bool	member	(list(int)) -> bool
isSorted	list_uint_is_sorted_bool	member	(list(uint)) -> bool
isSorted	list_double_is_sorted_bool	member	(list(double)) -> bool
isSorted	list_bool_is_sorted_bool	member	(list(bool)) -> bool
isSorted	list_duration_is_sorted_bool	member	(list(duration)) -> bool
isSorted	list_timestamp_is_sorted_bool	member	(list(timestamp)) -> bool
isSorted	list_string_is_sorted_bool	member	(list(string)) -> bool
isSorted	list_bytes_is_sorted_bool	member	(list(bytes)) -> bool
isURL	is_url_string	global	(string) -> bool	unsupported
isUnspecified	ip_is_unspecified	member	(net.IP) -> bool	unsupported
join	list_join	member	(list(string)) -> string
join	list_join_string	member	(list(string), string) -> string
labelSelector	authorizer_labelselector	member	(kubernetes.authorization.ResourceCheck, string) -> kubernetes.authorization.ResourceCheck	unsupported
last	list_last	member	(list(V)) -> optional_type(V)
lastIndexOf	list_a_last_index_of_int	member	(list(A), A) -> int	..1.36
lastIndexOf	string_last_index_of_string	member	(string, string) -> int	..1.36
lastIndexOf	string_last_index_of_string_int	member	(string, string, int) -> int	..1.36
lastIndexOf	string_last_index_of_string	member	(string, string) -> int	1.37
lastIndexOf	string_last_index_of_string_int	member	(string, string, int) -> int	1.37
lastIndexOf	list_a_last_index_of_int	member	(list(A), A) -> int	1.37
lists.range	lists_range	global	(int) -> list(int)
lowerAscii	string_lower_ascii	member	(string) -> string
major	semver_major	member	(kubernetes.Semver) -> int
masked	cidr_masked	member	(net.CIDR) -> net.CIDR	unsupported
matches	matches	global	(string, string) -> bool
matches	matches_string	member	(string, string) -> bool
max	list_int_max_int	member	(list(int)) -> int
max	list_uint_max_uint	member	(list(uint)) -> uint
max	list_double_max_double	member	(list(double)) -> double
max	list_bool_max_bool	member	(list(bool)) -> bool
max	list_duration_max_duration	member	(list(duration)) -> duration
max	list_timestamp_max_timestamp	member	(list(timestamp)) -> timestamp
max	list_string_max_string	member	(list(string)) -> string
max	list_bytes_max_bytes	member	(list(bytes)) -> bytes
min	list_int_min_int	member	(list(int)) -> int
min	list_uint_min_uint	member	(list(uint)) -> uint
min	list_double_min_double	member	(list(double)) -> double
min	list_bool_min_bool	member	(list(bool)) -> bool
min	list_duration_min_duration	member	(list(duration)) -> duration
min	list_timestamp_min_timestamp	member	(list(timestamp)) -> timestamp
min	list_string_min_string	member	(list(string)) -> string
min	list_bytes_min_bytes	member	(list(bytes)) -> bytes
minor	semver_minor	member	(kubernetes.Semver) -> int
name	resourcecheck_name	member	(kubernetes.authorization.ResourceCheck, string) -> kubernetes.authorization.ResourceCheck	unsupported
namespace	resourcecheck_namespace	member	(kubernetes.authorization.ResourceCheck, string) -> kubernetes.authorization.ResourceCheck	unsupported
optional.none	optional_none	global	() -> optional_type(V)
optional.of	optional_of	global	(V) -> optional_type(V)
optional.ofNonZeroValue	optional_ofNonZeroValue	global	(V) -> optional_type(V)
optional.unwrap	optional_unwrap	global	(list(optional_type(V))) -> list(V)
or	optional_or_optional	member	(optional_type(V), optional_type(V)) -> optional_type(V)
orValue	optional_orValue_value	member	(optional_type(V), V) -> V
patch	semver_patch	member	(kubernetes.Semver) -> int
path	authorizer_path	member	(kubernetes.authorization.Authorizer, string) -> kubernetes.authorization.PathCheck	unsupported
prefixLength	cidr_prefix_length	member	(net.CIDR) -> int	unsupported
quantity	string_to_quantity	global	(string) -> kubernetes.Quantity
reason	decision_reason	member	(kubernetes.authorization.Decision) -> string	unsupported
replace	string_replace_string_string	member	(string, string, string) -> string
replace	string_replace_string_string_int	member	(string, string, string, int) -> string
resource	groupcheck_resource	member	(kubernetes.authorization.GroupCheck, string) -> kubernetes.authorization.ResourceCheck	unsupported
reverse	list_reverse	member	(list(T)) -> list(T)
semver	string_to_semver	global	(string) -> kubernetes.Semver
semver	string_bool_to_semver	global	(string, bool) -> kubernetes.Semver
serviceAccount	authorizer_serviceaccount	member	(kubernetes.authorization.Authorizer, string, string) -> kubernetes.authorization.Authorizer	unsupported
sets.contains	list_sets_contains_list	global	(list(T), list(T)) -> bool
sets.equivalent	list_sets_equivalent_list	global	(list(T), list(T)) -> bool
sets.intersects	list_sets_intersects_list	global	(list(T), list(T)) -> bool
sign	quantity_sign	global	(kubernetes.Quantity) -> int
size	size_bytes	global	(bytes) -> int
size	bytes_size	member	(bytes) -> int
size	size_list	global	(list(A)) -> int
size	list_size	member	(list(A)) -> int
size	size_map	global	(map(A, B)) -> int
size	map_size	member	(map(A, B)) -> int
size	size_string	global	(string) -> int
size	string_size	member	(string) -> int
slice	list_slice	member	(list(T), int, int) -> list(T)
sort	list_int_sort	member	(list(int)) -> list(int)
sort	list_uint_sort	member	(list(uint)) -> list(uint)
sort	list_double_sort	member	(list(double)) -> list(double)
sort	list_bool_sort	member	(list(bool)) -> list(bool)
sort	list_google.protobuf.Duration_sort	member	(list(duration)) -> list(duration)
sort	list_google.protobuf.Timestamp_sort	member	(list(timestamp)) -> list(timestamp)
sort	list_string_sort	member	(list(string)) -> list(string)
sort	list_bytes_sort	member	(list(bytes)) -> list(bytes)
split	string_split_string	member	(string, string) -> list(string)
split	string_split_string_int	member	(string, string, int) -> list(string)
startsWith	starts_with_string	member	(string, string) -> bool
string	string_to_string	global	(string) -> string
string	bool_to_string	global	(bool) -> string
string	bytes_to_string	global	(bytes) -> string
string	double_to_string	global	(double) -> string
string	duration_to_string	global	(duration) -> string
string	int64_to_string	global	(int) -> string
string	timestamp_to_string	global	(timestamp) -> string
string	uint64_to_string	global	(uint) -> string
string	ip_to_string	global	(net.IP) -> string	unsupported
string	cidr_to_string	global	(net.CIDR) -> string	unsupported
strings.quote	strings_quote	global	(string) -> string
sub	quantity_sub	member	(kubernetes.Quantity, kubernetes.Quantity) -> kubernetes.Quantity
sub	quantity_sub_int	member	(kubernetes.Quantity, int) -> kubernetes.Quantity
subresource	resourcecheck_subresource	member	(kubernetes.authorization.ResourceCheck, string) -> kubernetes.authorization.ResourceCheck	unsupported
substring	string_substring_int	member	(string, int) -> string
substring	string_substring_int_int	member	(string, int, int) -> string
sum	list_int_sum_int	member	(list(int)) -> int
sum	list_uint_sum_uint	member	(list(uint)) -> uint
sum	list_double_sum_double	member	(list(double)) -> double
sum	list_duration_sum_duration	member	(list(duration)) -> duration
timestamp	timestamp_to_timestamp	global	(timestamp) -> timestamp	unsupported
timestamp	int64_to_timestamp	global	(int) -> timestamp	unsupported
timestamp	string_to_timestamp	global	(string) -> timestamp	unsupported
trim	string_trim	member	(string) -> string
type	type	global	(A) -> type(A)
uint	uint64_to_uint64	global	(uint) -> uint
uint	double_to_uint64	global	(double) -> uint
uint	int64_to_uint64	global	(int) -> uint
uint	string_to_uint64	global	(string) -> uint
unwrapOpt	optional_unwrapOpt	member	(list(optional_type(V))) -> list(V)
upperAscii	string_upper_ascii	member	(string) -> string
url	string_to_url	global	(string) -> kubernetes.URL	unsupported
validate	format-validate	member	(kubernetes.NamedFormat, string) -> optional_type(list(string))	unsupported
value	optional_value	member	(optional_type(V)) -> V
"#;
