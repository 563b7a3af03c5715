"""The base of the wrappers that add a message hook (DP noise, faults) to an environment without changing it.

A wrapper **decorates**: it never touches the env it wraps. :meth:`HookWrapper.message_hooks` is the chain's
list of hooks (the wrapped env's, then the wrapper's own), and at every reset the wrapper hands that list to
the env in ``options[MESSAGE_HOOKS]``; the env gives it to its core for that episode only (the batched run
path resets the core with ``env.message_hooks()`` of the outermost wrapper). So the wrapped env, reset on
its own, runs with the hooks of its own chain (none when it is unwrapped), and two wrappers around one env
object are independent of each other.

**Composition.** Wrappers of different kinds compose in order, the innermost first:
``MessageDrops(ByzantineAgents(env))`` corrupts each record once, then loses copies of it;
``LaplaceMessageDP(ByzantineAgents(env))`` noises what the byzantine agents send (clipped to the declared bounds
first, corrupted values included), and
``ByzantineAgents(LaplaceMessageDP(env))`` corrupts the noised messages; a DP wrapper refuses to wrap
``MessageDelays`` (:attr:`HookWrapper.holds_copies`: noise and charges belong to the slot a message is sent in, so
``MessageDelays(LaplaceMessageDP(env))``), and ``ByzantineAgents`` refuses to wrap ``MessageDrops`` or
``MessageDelays`` (:attr:`HookWrapper.splits_broadcasts`: it draws once per record, and every copy of a record is
the same, so ``MessageDrops(ByzantineAgents(env))``); :func:`refuse_to_wrap` raises these errors, naming the order to
use. A chain holds **one wrapper of each kind** (:attr:`HookWrapper.kind`: DP, byzantine agents, drops, delays); a
second raises a ``ValueError`` that says what to use instead (``HookWrapper(env, hook)`` itself, a user's own hook,
has no kind and composes freely):

* two DP wrappers (``LaplaceMessageDP(GaussianMessageDP(env))``, ``LaplaceMessageDP(LaplaceMessageDP(env))``)
  would noise every sensitive field twice and keep two accountants and budgets for one agent: summing them
  overstates what the stacked release costs, and runners that bind an algorithm to the wrapper's epsilon
  would see only one of them. Use one DP wrapper with the mechanism and epsilon wanted (``epsilon`` may be
  a function of the release index).
* two fault wrappers of one kind would draw from the same child of the episode's ``adversary`` stream, so
  their draws would coincide. One wrapper expresses the combination (see each wrapper's ``combine`` hint).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from pettingzoo.utils import BaseParallelWrapper

from fedbandit_envs.core import MessageHook, check_hooks
from fedbandit_envs.env_base import MESSAGE_HOOKS, ProtocolParallelEnv

__all__ = ["HookClassWrapper", "HookWrapper", "layers", "refuse_to_wrap"]


def _begins_with(hooks: Sequence[Any], chain: list[MessageHook]) -> bool:
    """Whether ``hooks`` begin with the very hook objects of ``chain``."""
    return len(hooks) >= len(chain) and all(a is b for a, b in zip(hooks, chain))


def layers(env: Any) -> Iterator[Any]:
    """The wrappers of a chain, outermost first."""
    while isinstance(env, BaseParallelWrapper):
        yield env
        env = env.env


def refuse_to_wrap(wrapper: str, env: Any, attribute: str, why: str, instead: str) -> None:
    """Raise ``ValueError`` if a layer of ``env``'s chain sets ``attribute``: ``wrapper`` cannot wrap it (``why``).

    The error names the order to use instead (the layer found outside ``wrapper``) and what that order does
    (``instead``).
    """
    found = [type(layer).__name__ for layer in layers(env) if getattr(layer, attribute, False)]
    if found:
        raise ValueError(
            f"{wrapper} cannot wrap {found[0]}: {why}; wrap the other way round "
            f"({found[0]}({wrapper}(env, ...), ...)): {instead}"
        )


class HookWrapper(BaseParallelWrapper):
    """Adds ``hook`` to the message hooks of the wrapped fedbandit environment's episodes (the env is unchanged).

    Args:
        env: a fedbandit environment, possibly wrapped already (by wrappers of other kinds).
        hook: the message hook (``reset(context, streams)``, ``__call__(slot, batches) -> batches``; see
            :class:`~fedbandit_envs.core.MessageHook`).
    """

    #: What the hook does; a chain holds one wrapper of each kind (None: any number, e.g. a user's own hooks).
    kind: ClassVar[str | None] = None
    #: How to get the effect of two wrappers of this kind from one (the fix named by the error).
    combine: ClassVar[str] = ""
    #: Whether the hook hands the hooks after it one row per recipient of a ``NEIGHBOURS`` broadcast (per-copy
    #: faults), so that a DP hook outside it sees every copy of a broadcast as a release of its own
    #: (``TreeMessageDP`` and ``ByzantineAgents`` refuse to sit outside it: they act once per message or record).
    splits_broadcasts: ClassVar[bool] = False
    #: Whether the hook holds copies back to later slots, so that the hooks after it see a copy only when it is
    #: released (a DP wrapper refuses to sit outside it: noise and charges belong to the slot a message is sent in;
    #: so does ``ByzantineAgents``: a record is corrupted in the slot it is created in).
    holds_copies: ClassVar[bool] = False

    def __init__(self, env: Any, hook: MessageHook) -> None:
        if not isinstance(getattr(env, "unwrapped", None), ProtocolParallelEnv):
            raise TypeError(f"{type(self).__name__} wraps a fedbandit environment (e.g. FederatedMAB), got {env!r}")
        check_hooks([hook])
        same_kind = [layer for layer in layers(env) if isinstance(layer, HookWrapper) and layer.kind == self.kind]
        if self.kind is not None and same_kind:
            raise ValueError(
                f"{type(self).__name__} cannot wrap an environment already wrapped in {type(same_kind[0]).__name__}: "
                f"a wrapper chain holds one {self.kind} wrapper (see wrappers.chain); {self.combine}"
            )
        super().__init__(env)
        self.hook = hook

    def message_hooks(self) -> list[MessageHook]:
        """The hooks of the chain ending here: the wrapped env's, then this wrapper's (applied in that order)."""
        return [*self.env.message_hooks(), self.hook]

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Reset the wrapped env with the chain's hooks (an outer wrapper's list, which begins with them, is kept)."""
        options = dict(options or {})
        hooks = self.message_hooks()
        if not _begins_with(list(options.setdefault(MESSAGE_HOOKS, hooks)), hooks):
            raise ValueError(
                f"options[{MESSAGE_HOOKS!r}] must begin with the hooks of this wrapper chain; leave the key out "
                "(the wrappers fill it in) or add hooks with a wrapper (wrappers.HookWrapper)"
            )
        return self.env.reset(seed=seed, options=options)

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        """Step the env; RuntimeError unless its episode was reset through this wrapper (else the hook would be off)."""
        if not _begins_with(getattr(self.unwrapped.core, "message_hooks", ()), self.message_hooks()):
            raise RuntimeError(
                f"the episode was not reset through this {type(self).__name__} (it wrapped the env after the last "
                "reset, or the env was reset without it), so its hook is not on; call reset() on the wrapper first"
            )
        return self.env.step(actions)


class HookClassWrapper(HookWrapper):
    """A :class:`HookWrapper` that builds its hook, a ``hook_class``, from the arguments after ``env``.

    The arguments are the hook class's (documented there once); ``inspect.signature`` of the wrapper lists them
    after ``env``.
    """

    #: The hook this wrapper builds from its arguments.
    hook_class: ClassVar[type]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Give a wrapper with a ``hook_class`` the signature ``(env, <the hook class's parameters>)``."""
        super().__init_subclass__(**kwargs)
        if "hook_class" in cls.__dict__:
            hook = inspect.signature(cls.hook_class)
            env = inspect.Parameter("env", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="Any")
            cls.__signature__ = hook.replace(parameters=[env, *hook.parameters.values()])

    def __init__(self, env: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(env, self.hook_class(*args, **kwargs))
