//! The adapter between native groups and the coordinator's shared state:
//! [`Ctx::native`] builds a group's [`NativeEnv`], runs one group method with an empty
//! [`Effects`] list and hands the [`GroupResult`](crate::core::result::GroupResult) to
//! the one applier (`Ctx::apply`).

use super::effects::NativeEnv;
use super::group::NativeGroup;
use crate::core::result::Effects;
use crate::core::Ctx;

impl Ctx {
    /// Runs `f` on group `g` with the group's environment and applies what it decided.
    pub(in crate::core) fn native<R>(
        &mut self,
        g: &mut NativeGroup,
        f: impl FnOnce(&mut NativeGroup, &NativeEnv<'_>, &mut Effects<'_>) -> R,
    ) -> R {
        let (env, mut fx) = self.native_call(&g.id);
        let response = f(g, &env, &mut fx);
        let result = fx.finish(response);
        self.apply(result)
    }
}
