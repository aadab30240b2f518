//! CEL device selectors (DeviceClass and request `selectors[].cel.expression`)
//! compiled and evaluated as the kube-scheduler's allocator does it through
//! k8s.io/dynamic-resource-allocation/cel: the `device` variable (driver,
//! attributes and capacity by domain, `allowMultipleAllocations`) in the
//! Kubernetes CEL environment of the release, checked for types before it may
//! run.
//!
//! Entry points: [`SelectorEnv`] (one per release and feature set, like the
//! scheduler's `cel.Cache`) compiles expressions into [`Selector`]s;
//! [`Selector::matches`] evaluates one against a [`DeviceView`].
//!
//! The `cel` crate parses and evaluates; this module adds what the Kubernetes
//! environment has beyond it: cel-go's type check (`check`), the Kubernetes
//! functions (`library`: quantities, semantic versions, lists, sets, regular
//! expressions, `cel.bind`), the device value (`values`), and Go's runtime
//! behaviour where the crate's differs (`program`). What cel-go accepts but
//! this module does not evaluate is refused as
//! [`SelectorError::Unsupported`], never guessed: timestamps and durations,
//! IP/CIDR/URL values, named formats, `string.format`, two-variable
//! comprehensions and the transform macros.
//!
//! Pure: no I/O; evaluation allocates the device value per call.

mod check;
mod decls;
mod library;
mod program;
mod quantity;
mod semver;
mod types;
mod values;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};

use cel::common::types::CelBool;
use cel::{Context, ExecutionError, Value};
use k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceCapacity};

use crate::features::Features;

use self::check::DeviceFields;
use self::decls::Declarations;
use self::types::Ty;

/// What a selector sees of one device.
#[derive(Clone, Copy, Debug)]
pub struct DeviceView<'a> {
    pub driver: &'a str,
    pub attributes: &'a BTreeMap<String, DeviceAttribute>,
    pub capacity: &'a BTreeMap<String, DeviceCapacity>,
    /// What the allocator passes as `AllowMultipleAllocations` (false when it
    /// passes none, as the stable allocator does).
    pub allow_multiple_allocations: bool,
}

/// A selector that failed to compile or to evaluate; each carries the
/// expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// cel-go refuses the expression (syntax, types, result type, a constant
    /// that fails when the program is planned). The allocator's
    /// "CEL compile error".
    #[error("CEL compile error in {expression:?}: {message}")]
    Compile { expression: String, message: String },
    /// The expression failed on this device (a missing attribute, a value of
    /// the wrong type, an attribute the release cannot read). The
    /// allocator's "CEL runtime error".
    #[error("CEL runtime error in {expression:?}: {message}")]
    Runtime { expression: String, message: String },
    /// cel-go accepts the expression but topoalign does not evaluate it (see
    /// the module documentation); not a verdict Kubernetes would give.
    #[error("CEL selector {expression:?} uses what topoalign does not evaluate: {message}")]
    Unsupported { expression: String, message: String },
}

impl SelectorError {
    pub fn expression(&self) -> &str {
        match self {
            SelectorError::Compile { expression, .. }
            | SelectorError::Runtime { expression, .. }
            | SelectorError::Unsupported { expression, .. } => expression,
        }
    }

    /// The error without the expression (for Go's allocator messages,
    /// `CEL compile error: <message>`).
    pub fn message(&self) -> &str {
        match self {
            SelectorError::Compile { message, .. }
            | SelectorError::Runtime { message, .. }
            | SelectorError::Unsupported { message, .. } => message,
        }
    }
}

/// The kube-scheduler releases whose selector environment this module
/// reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Release {
    V1_34,
    V1_35,
    V1_36,
    V1_37,
}

impl Release {
    pub const ALL: [Release; 4] = [Release::V1_34, Release::V1_35, Release::V1_36, Release::V1_37];

    /// `"1.34"` … `"1.37"`.
    pub fn parse(text: &str) -> Option<Release> {
        Some(match text {
            "1.34" => Release::V1_34,
            "1.35" => Release::V1_35,
            "1.36" => Release::V1_36,
            "1.37" => Release::V1_37,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Release::V1_34 => "1.34",
            Release::V1_35 => "1.35",
            Release::V1_36 => "1.36",
            Release::V1_37 => "1.37",
        }
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The selector environment of one release and feature set: what
/// `cel.NewCache(n, cel.Features{...})` gives the scheduler (its compiler for
/// stored expressions). Compiled selectors are cached by expression.
pub struct SelectorEnv {
    release: Release,
    /// 1.36 only: `DRAListTypeAttributes` makes attribute values `dyn` (so
    /// lists can be iterated) and lets list attributes be read.
    list_type_attributes: bool,
    decls: Declarations,
    device: DeviceFields,
    cache: Mutex<HashMap<String, Result<Arc<Selector>, SelectorError>>>,
}

impl fmt::Debug for SelectorEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelectorEnv")
            .field("release", &self.release)
            .field("list_type_attributes", &self.list_type_attributes)
            .finish_non_exhaustive()
    }
}

impl SelectorEnv {
    /// The environment of `release` under `features` (only
    /// `ListTypeAttributes` changes it, and only in 1.36: the scheduler
    /// compiles selectors as stored expressions, which ignore feature gates
    /// in the declarations).
    pub fn new(release: Release, features: &Features) -> SelectorEnv {
        let list_type_attributes = features.list_type_attributes;
        let attribute = match release {
            Release::V1_34 | Release::V1_35 => Ty::Any,
            Release::V1_36 if list_type_attributes => Ty::Dyn,
            Release::V1_36 => Ty::Any,
            Release::V1_37 => Ty::Dyn,
        };
        let by_domain = |t: Ty| Ty::map(Ty::String, Ty::map(Ty::String, t));
        let device = DeviceFields {
            fields: vec![
                ("driver", Ty::String),
                ("attributes", by_domain(attribute)),
                ("capacity", by_domain(Ty::Struct("kubernetes.Quantity".to_owned()))),
                // declared in every release's stored-expression environment
                ("allowMultipleAllocations", Ty::Bool),
            ],
        };
        SelectorEnv {
            release,
            list_type_attributes,
            decls: Declarations::of(release),
            device,
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub fn release(&self) -> Release {
        self.release
    }

    /// Whether the release reads list-valued attributes (1.37 always, 1.36
    /// with `DRAListTypeAttributes`; older releases have no such fields).
    fn reads_lists(&self) -> bool {
        match self.release {
            Release::V1_34 | Release::V1_35 => false,
            Release::V1_36 => self.list_type_attributes,
            Release::V1_37 => true,
        }
    }

    /// The result types the release accepts besides `bool` (an attribute's
    /// type, whose value may be a bool).
    fn accepts_result(&self, t: &Ty) -> bool {
        match self.release {
            Release::V1_34 | Release::V1_35 => *t == Ty::Bool || *t == Ty::Any,
            Release::V1_36 => *t == Ty::Bool || *t == Ty::Any || (self.list_type_attributes && *t == Ty::Dyn),
            Release::V1_37 => *t == Ty::Bool || *t == Ty::Dyn,
        }
    }

    /// Compiles `expression`, or answers from the cache.
    ///
    /// # Errors
    ///
    /// [`SelectorError::Compile`] where the scheduler's compiler refuses it,
    /// [`SelectorError::Unsupported`] where topoalign cannot evaluate it.
    pub fn get_or_compile(&self, expression: &str) -> Result<Arc<Selector>, SelectorError> {
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        cache
            .entry(expression.to_owned())
            .or_insert_with(|| self.compile(expression).map(Arc::new))
            .clone()
    }

    /// Compiles `expression` (no cache).
    ///
    /// # Errors
    ///
    /// As [`SelectorEnv::get_or_compile`].
    pub fn compile(&self, expression: &str) -> Result<Selector, SelectorError> {
        // The crate's parser recurses deeply on broken nested input (over
        // 100 MiB of stack for 249 unclosed calls in a debug build): compile
        // where that cannot overflow.
        on_big_stack(|| self.compile_here(expression))
    }

    fn compile_here(&self, expression: &str) -> Result<Selector, SelectorError> {
        let compile_error = |message: String| SelectorError::Compile {
            expression: expression.to_owned(),
            message,
        };
        let unsupported = |message: String| SelectorError::Unsupported {
            expression: expression.to_owned(),
            message,
        };
        if nesting(expression) >= MAX_RECURSION_DEPTH {
            // refused before the parser recurses that deep
            return Err(compile_error(format!(
                "compilation failed: expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"
            )));
        }
        let parsed = library::ENV
            .parser()
            // the crate's parser refuses more than one level beyond its limit
            .max_recursion_depth(MAX_RECURSION_DEPTH - 1)
            .parse(expression)
            .map_err(|e| compile_error(format!("compilation failed: {e}")))?;
        if depth(&parsed) > usize::from(MAX_RECURSION_DEPTH) + 1 {
            return Err(compile_error(
                "compilation failed: max recursion depth exceeded".to_owned(),
            ));
        }
        let checked = check::check(&parsed, &self.decls, &self.device);
        if !checked.errors.is_empty() {
            return Err(compile_error(format!(
                "compilation failed: {}",
                checked.errors.join("; ")
            )));
        }
        let result = checked.type_of(parsed.id);
        if !self.accepts_result(&result) {
            return Err(compile_error(format!(
                "must evaluate to bool or the unknown type, not {result}"
            )));
        }
        let invalid = program::validate(&parsed, &checked);
        if !invalid.is_empty() {
            return Err(compile_error(format!("compilation failed: {}", invalid.join("; "))));
        }
        if !checked.unsupported.is_empty() {
            let mut what = checked.unsupported.clone();
            what.dedup();
            return Err(unsupported(what.join(", ")));
        }
        let program = program::rewrite(&parsed, &checked, self.release);
        let failures = program::plan(&program);
        if let Some(first) = failures.first() {
            return Err(compile_error(format!("program instantiation failed: {first}")));
        }
        let program = program::fold_empty_in(&program, &checked);
        Ok(Selector {
            expression: expression.to_owned(),
            deep: depth(&program) > DEEP_PROGRAM,
            program,
            reads_lists: self.reads_lists(),
        })
    }
}

/// cel-go's parser recursion limit (`parser.MaxRecursionDepth` default):
/// 250 nested parentheses, brackets or braces are refused, and so is an
/// expression more than 251 nodes deep (a chain of 251 binary operators).
const MAX_RECURSION_DEPTH: u16 = 250;

/// The deepest nesting of parentheses, brackets and braces outside string
/// literals.
fn nesting(expression: &str) -> u16 {
    let (mut depth, mut deepest) = (0u16, 0u16);
    let mut quote: Option<char> = None;
    let mut chars = expression.chars();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                if c == '\\' {
                    chars.next();
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' => quote = Some(c),
                '(' | '[' | '{' => {
                    depth = depth.saturating_add(1);
                    deepest = deepest.max(depth);
                }
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    deepest
}

/// The depth of the parsed expression (iteratively: it may be deep).
fn depth(expr: &cel::IdedExpr) -> usize {
    use cel::common::ast::{EntryExpr, Expr};
    let mut deepest = 0;
    let mut stack = vec![(expr, 1usize)];
    while let Some((e, d)) = stack.pop() {
        deepest = deepest.max(d);
        match &e.expr {
            Expr::Call(call) => {
                stack.extend(call.target.iter().map(|t| (&**t, d + 1)));
                stack.extend(call.args.iter().map(|a| (a, d + 1)));
            }
            Expr::Select(s) => stack.push((&s.operand, d + 1)),
            Expr::List(l) => stack.extend(l.elements.iter().map(|x| (x, d + 1))),
            Expr::Map(m) => {
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        stack.push((&entry.key, d + 1));
                        stack.push((&entry.value, d + 1));
                    }
                }
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        stack.push((&f.value, d + 1));
                    }
                }
            }
            Expr::Comprehension(c) => {
                // a macro's expansion is one call deep in the source
                stack.push((&c.iter_range, d + 1));
                stack.push((&c.accu_init, d + 1));
                stack.push((&c.loop_step, d + 1));
                stack.push((&c.result, d + 1));
            }
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
    deepest
}

/// A compiled CEL selector.
#[derive(Debug)]
pub struct Selector {
    expression: String,
    program: cel::IdedExpr,
    reads_lists: bool,
    /// Deep enough that evaluating it needs more stack than a thread may
    /// have (see [`on_big_stack`]).
    deep: bool,
}

/// Programs deeper than this are evaluated on a thread of their own.
const DEEP_PROGRAM: usize = 32;

/// The stack of the threads that parse, and evaluate deep programs: the
/// parser's worst case (249 nested unclosed calls) stays within it in debug
/// builds. Only the pages used are committed.
const BIG_STACK: usize = 512 << 20;

/// Runs `f` on a scoped thread with [`BIG_STACK`] of stack, or here if no
/// thread can be made.
fn on_big_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let work = Mutex::new(Some(f));
    let take = || work.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    let spawned = std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("cel-selector".to_owned())
            .stack_size(BIG_STACK)
            .spawn_scoped(scope, || take().map(|f| f()))
            .ok()?;
        match handle.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    match spawned {
        Some(result) => result,
        // no thread: here, then (the work is still there)
        None => take().map_or_else(|| unreachable!("the work ran and returned"), |f| f()),
    }
}

impl Selector {
    /// Compiles `expression` for the newest release (1.37).
    ///
    /// # Errors
    ///
    /// As [`SelectorEnv::compile`].
    pub fn compile(expression: &str, features: &Features) -> Result<Self, SelectorError> {
        SelectorEnv::new(Release::V1_37, features).compile(expression)
    }

    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Does the device satisfy the selector?
    ///
    /// # Errors
    ///
    /// [`SelectorError::Runtime`] when the expression fails on this device,
    /// or when the device has an attribute the release cannot read (an
    /// attribute with no value, a version that is not semantic), which fails
    /// every selector as it does in Go.
    pub fn matches(&self, device: &DeviceView<'_>) -> Result<bool, SelectorError> {
        if self.deep {
            on_big_stack(|| self.matches_here(device))
        } else {
            self.matches_here(device)
        }
    }

    fn matches_here(&self, device: &DeviceView<'_>) -> Result<bool, SelectorError> {
        let runtime_error = |message: String| SelectorError::Runtime {
            expression: self.expression.clone(),
            message,
        };
        let value = values::device_value(device, self.reads_lists).map_err(|e| runtime_error(e.0))?;
        library::reset_cost();
        let mut context = Context::with_env(library::ENV.clone());
        context.add_variable_as_val("device", Box::new(value));
        let result = Value::resolve_val(&self.program, &context).map_err(|e| runtime_error(runtime_message(&e)))?;
        match result.downcast_ref::<CelBool>() {
            Some(b) => Ok(*b.inner()),
            None => Err(runtime_error(format!(
                "CEL result of type {} could not be converted to bool",
                result.get_type().name()
            ))),
        }
    }
}

/// A runtime error as cel-go words it, where the crate's wording differs.
fn runtime_message(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::NoSuchOverload(o) => format!("no such overload: {o}"),
        ExecutionError::ValuesNotComparable(..)
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::UnexpectedType { .. }
        | ExecutionError::UnsupportedTargetType { .. }
        | ExecutionError::NotSupportedAsMethod { .. } => format!("no such overload ({e})"),
        ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_owned(),
        ExecutionError::Overflow(..) => "integer overflow".to_owned(),
        ExecutionError::IndexOutOfBounds(i) => format!("index out of bounds: {i:?}"),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// One overload of the selector environment of `release`, as cel-go's
/// `dracel decls` lists it (`function\toverload-id\tmember|global\t(args) -> result`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declaration {
    pub signature: String,
    /// Whether topoalign evaluates it.
    pub supported: bool,
}

/// Every function overload a selector may call in `release`.
pub fn declarations(release: Release) -> Vec<Declaration> {
    Declarations::listing(release)
        .into_iter()
        .map(|(signature, supported)| Declaration { signature, supported })
        .collect()
}
