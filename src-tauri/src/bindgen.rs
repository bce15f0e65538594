//! The window's command wrappers, generated from each command's own Rust signature.
//!
//! Every command is written inside [`window_command!`]: the macro emits the function as
//! written (for `#[tauri::command]`) and, for tests, a description of it built from the
//! same tokens: its name, doc lines, each argument's name and `ts_rs::TS` type, and the
//! type of its `Reply`. So the names and types in `ui/src/lib/commands.ts` are the ones the
//! compiler checked; `bindings_tests.rs` writes that file and fails when it is stale.

/// Wraps one `#[tauri::command]` function; see the module docs. It must return
/// `Reply<T>` and keep its doc comments before the `#[tauri::command]` attribute.
macro_rules! window_command {
    (
        $(#[doc = $doc:literal])*
        #[tauri::command $(($($option:tt)*))?]
        pub async fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $reply:ty $body:block
    ) => {
        $(#[doc = $doc])*
        #[tauri::command $(($($option)*))?]
        pub async fn $name($($arg: $ty),*) -> $reply $body
        window_command!(@describe $name [$($doc),*] [$($arg: $ty),*] $reply);
    };
    (
        $(#[doc = $doc:literal])*
        #[tauri::command $(($($option:tt)*))?]
        pub fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $reply:ty $body:block
    ) => {
        $(#[doc = $doc])*
        #[tauri::command $(($($option)*))?]
        pub fn $name($($arg: $ty),*) -> $reply $body
        window_command!(@describe $name [$($doc),*] [$($arg: $ty),*] $reply);
    };
    (@describe $name:ident [$($doc:literal),*] [$($arg:ident: $ty:ty),*] $reply:ty) => {
        /// The command's description for the generated wrappers (same name as the command,
        /// in the module namespace).
        #[cfg(test)]
        pub mod $name {
            #[allow(unused_imports)]
            use super::*;

            pub fn describe(cfg: &::ts_rs::Config) -> $crate::bindgen::CommandShape {
                #[allow(unused_imports)]
                use $crate::bindgen::{SpecialArg as _, WindowArg as _};
                $crate::bindgen::CommandShape {
                    name: stringify!($name),
                    docs: vec![$($doc),*],
                    args: vec![$((
                        stringify!($arg),
                        (&$crate::bindgen::Arg::<$ty>::new()).kind(cfg),
                    )),*],
                    ok: <$reply as $crate::bindgen::CommandReply>::ok(cfg),
                }
            }
        }
    };
}

pub(crate) use window_command;

#[cfg(test)]
pub use described::*;

#[cfg(test)]
mod described {
    use std::marker::PhantomData;

    use conduit_host::app::CommandError;
    use ts_rs::{Config, TS};

    /// What a command looks like to the window.
    pub struct CommandShape {
        /// As in commands.list and `invoke`.
        pub name: &'static str,
        /// Its Rust doc lines.
        pub docs: Vec<&'static str>,
        /// Each argument's Rust name (Tauri reads it in camelCase) and how it travels.
        pub args: Vec<(&'static str, ArgKind)>,
        /// The TypeScript type of its answer.
        pub ok: String,
    }

    /// How one argument reaches the command.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum ArgKind {
        /// Supplied by Tauri (state, the app handle): the window sends nothing.
        Injected,
        /// A JSON value of this TypeScript type.
        Value(String),
        /// A stream whose messages have this TypeScript type (`EventStream`): the window
        /// passes a callback, its wrapper the stream's number.
        Stream(String),
        /// The raw request body: the window passes a `Blob` whose bytes are sent.
        RawBody,
    }

    /// Stands for an argument type while its kind is picked (see [`WindowArg`]).
    pub struct Arg<T: ?Sized>(PhantomData<T>);

    impl<T: ?Sized> Arg<T> {
        pub fn new() -> Self {
            Self(PhantomData)
        }
    }

    /// An argument the window sends as JSON: any `TS` type. Picked first:
    /// `(&Arg::<T>::new()).kind(cfg)` finds this method without auto-referencing, and
    /// falls back to [`SpecialArg`] (one reference more) only when `T` is not `TS`.
    pub trait WindowArg {
        fn kind(&self, cfg: &Config) -> ArgKind;
    }

    impl<T: TS + ?Sized> WindowArg for Arg<T> {
        fn kind(&self, cfg: &Config) -> ArgKind {
            ArgKind::Value(T::name(cfg))
        }
    }

    /// The arguments that are not JSON values. A type that is neither `TS` nor one of
    /// these does not compile.
    pub trait Special {
        fn kind(cfg: &Config) -> ArgKind;
    }

    pub trait SpecialArg {
        fn kind(&self, cfg: &Config) -> ArgKind;
    }

    impl<T: Special> SpecialArg for &Arg<T> {
        fn kind(&self, cfg: &Config) -> ArgKind {
            T::kind(cfg)
        }
    }

    impl<T: Send + Sync + 'static> Special for tauri::State<'_, T> {
        fn kind(_: &Config) -> ArgKind {
            ArgKind::Injected
        }
    }

    impl Special for tauri::AppHandle {
        fn kind(_: &Config) -> ArgKind {
            ArgKind::Injected
        }
    }

    impl Special for tauri::Webview {
        fn kind(_: &Config) -> ArgKind {
            ArgKind::Injected
        }
    }

    impl<T: TS> Special for crate::events::EventStream<T> {
        fn kind(cfg: &Config) -> ArgKind {
            ArgKind::Stream(T::name(cfg))
        }
    }

    impl Special for tauri::ipc::Request<'_> {
        fn kind(_: &Config) -> ArgKind {
            ArgKind::RawBody
        }
    }

    /// What a command returns: always `Reply<T>`, so every command rejects with a
    /// [`CommandError`].
    pub trait CommandReply {
        fn ok(cfg: &Config) -> String;
    }

    impl<T: TS> CommandReply for Result<T, CommandError> {
        fn ok(cfg: &Config) -> String {
            match T::name(cfg).as_str() {
                // `()` serializes as `null`; the window only awaits it.
                "null" => "void".to_owned(),
                name => name.to_owned(),
            }
        }
    }
}
