"""FSDP units of a torch module for shardopt.torch (docs/torch.md): which parameters gather together, and the hooks
that gather a unit's parameters just before its forward and again before its backward, and free them after each.

A unit is a submodule chosen by an auto-wrap policy with torch FSDP's signature, policy(module, recurse,
nonwrapped_numel) -> bool, applied bottom-up as FSDP applies it (a module whose children became units counts only
its remaining parameters); the parameters no unit holds form the root unit, the module given. Each unit is one or
more whole buckets of the library's FSDP optimizer (the layout ends a bucket where the unit changes), so gathering a
unit is the library's gather of those buckets, which prefetches the next one as it does for callbacks.

Between gathers a unit's parameters hold no memory: gathered, their .data are views of one flat tensor per unit;
freed, that tensor's storage is resized to 0 bytes and their .data are NaN placeholders of their shapes holding
no memory (FSDP's sharded parameters hold none of the full values either), so what
autograd saved for backward (the parameters, views of them) sees the parameters again once the unit is gathered
before its backward. The gathered values are copied in through
an alias of the flat tensor (.data) whose version counter is its own, so the saved tensors stay valid."""
import torch

from .. import shardopt_native as _n


def size_policy(min_params):
    """FSDP's size-based policy: a module becomes a unit when the parameters its children did not take number at
    least min_params (containers, which have no forward of their own, never do). As FSDP's, it does not look inside
    MultiheadAttention, whose forward uses its out_proj's parameters without calling out_proj."""
    def policy(module, recurse, nonwrapped_numel):
        if recurse:
            return not isinstance(module, torch.nn.MultiheadAttention)
        return nonwrapped_numel >= min_params and not isinstance(module, (torch.nn.ModuleList, torch.nn.ModuleDict))
    return policy


def assign_units(root, order, policy):
    """The unit modules (innermost first, the root last) and the unit of each tensor of `order` [(name, p)]."""
    wrapped = []

    def visit(module, only_children):
        total = sum(p.numel() for p in module.parameters())
        if not policy(module=module, recurse=True, nonwrapped_numel=total):
            return 0
        taken = sum(visit(child, False) for child in module.children())
        if not only_children and policy(module=module, recurse=False, nonwrapped_numel=total - taken):
            wrapped.append(module)
            return total
        return taken

    visit(root, True)
    modules = wrapped + [root]
    unit_of_param = {}
    for u, m in enumerate(modules):  # innermost first: a parameter belongs to the innermost unit holding it
        for p in m.parameters():
            unit_of_param.setdefault(id(p), u)
    return modules, [unit_of_param[id(p)] for _, p in order]


class Unit:
    """One unit: its tensors (indices into the optimizer's order), its parameters, its buckets (each with the
    unit's tensors in it), and the flat tensor the parameters' .data view while gathered."""

    def __init__(self, index, module, tensors, params, buckets, flat, offsets):
        self.index, self.module, self.tensors, self.params, self.buckets = index, module, tensors, params, buckets
        self.flat, self.offsets = flat, offsets
        self.sizes = {t: p.numel() for t, p in zip(tensors, params)}
        self.views = [flat[offsets[t]:offsets[t] + p.numel()].view(p.shape) for t, p in zip(tensors, params)]
        # what a freed parameter reads as: its shape (gradients and optimizers check it) over one NaN, no memory
        nan = flat.new_full((1,), float("nan"))
        self.placeholders = [nan.expand(p.shape) for p in params]
        self.nbytes = flat.numel() * flat.element_size()
        self.gathered, self.arrived, self.expected = True, 0, 0  # flat is allocated (and filled) when made

    def bind(self):
        for p, v in zip(self.params, self.views):
            p.data = v

    def free(self):
        """The flat storage to 0 bytes (what autograd saved keeps the storage object, refilled by the next
        gather) and each parameter's .data its placeholder: reading a parameter between uses gives NaNs of its
        shape, never a view of freed memory."""
        for p, placeholder in zip(self.params, self.placeholders):
            p.data = placeholder
        self.flat.untyped_storage().resize_(0)
        self.gathered = False


class FsdpUnits:
    """The units of one ShardedOptimizer under FSDP and their hooks."""

    def __init__(self, optimizer, modules, unit_of, reshard_after_forward=True):
        self._opt, self._reshard, self._root = optimizer, bool(reshard_after_forward), modules[-1]
        order, bucket_of = optimizer._order, optimizer._bucket_of
        self.units, self.unit_of = [], unit_of
        for u, module in enumerate(modules):
            tensors = [t for t, v in enumerate(unit_of) if v == u]
            if not tensors:
                continue
            # per bucket, the unit's tensors in it: what each gather copies, worked out once
            buckets = [(b, [t for t in tensors if bucket_of[t] == b]) for b in sorted({bucket_of[t] for t in tensors})]
            flat = torch.empty(sum(order[t][1].numel() for t in tensors), dtype=optimizer._dtype,
                               device=optimizer._placement.device)
            offsets, at = {}, 0
            for t in tensors:
                offsets[t] = at
                at += order[t][1].numel()
            unit = Unit(u, module, tensors, [order[t][1] for t in tensors], buckets, flat, offsets)
            unit.expected = sum(1 for t in tensors if order[t][1].requires_grad)
            self.units.append(unit)
        owner = {}
        for unit in self.units:
            for t in unit.tensors:
                owner[t] = unit
            for b, _ in unit.buckets:  # the layout's bucket breaks make every bucket one unit's
                others = [t for t in range(len(order)) if bucket_of[t] == b and unit_of[t] != unit.index]
                if others:
                    raise RuntimeError(f"internal: bucket {b} holds tensors of two FSDP units")
        self._owner = owner
        with torch.no_grad():
            for unit in self.units:
                unit.free()
        self._hooks = []
        for unit in self.units:
            self._hooks.append(unit.module.register_forward_pre_hook(lambda m, a, unit=unit: self.gather(unit)))
            self._hooks.append(unit.module.register_forward_hook(lambda m, a, out, unit=unit: self._after(unit, out)))
        # module.state_dict() holds the full values (a collective, as torch FSDP's full state dict is)
        self._names = {id(p): name for name, p in order}
        self._hooks.append(self._root.register_state_dict_pre_hook(lambda m, prefix, keep_vars: self.gather_all()))
        self._hooks.append(self._root.register_state_dict_post_hook(
            lambda m, state_dict, prefix, meta: self._state_dict_copied(state_dict, prefix)))  # (torch marks it)

    # ---- gathering ----
    def _fill(self, unit):
        """Collective: the unit's full parameters from the library into its flat tensor (allocated)."""
        so = self._opt._so
        dst = unit.flat.data  # an alias with a version counter of its own: the saved tensors' stay as they were
        for b, tensors in unit.buckets:
            _n.shardopt_optimizer_gather(so._h, b)
            try:
                for at, address, n in self._runs(unit, tensors):
                    dst[at:at + n].copy_(self._opt._placement.view(so._view(address, n)))
            finally:
                _n.shardopt_optimizer_release(so._h, b)

    def _runs(self, unit, tensors):
        """The gathered bucket's tensors as runs that lie back to back both in the library's buffer and in the flat
        tensor, (flat offset, address, count) each: one copy per run, not per tensor (a layer's weight and bias are
        one copy, a kernel launch and a view fewer)."""
        h, size = self._opt._so._h, unit.flat.element_size()
        runs = []
        for t in tensors:
            n, at = unit.sizes[t], unit.offsets[t]
            address = _n.shardopt_optimizer_tensor_parameters(h, t)
            if runs and runs[-1][0] + runs[-1][2] == at and runs[-1][1] + runs[-1][2] * size == address:
                runs[-1][2] += n
            else:
                runs.append([at, address, n])
        return runs

    def gather(self, unit):
        """Collective (every rank runs the same forward and backward): the unit's parameters, once per use."""
        if unit.gathered:
            return
        unit.flat.untyped_storage().resize_(unit.nbytes)
        unit.gathered, unit.arrived = True, 0
        self._fill(unit)
        unit.bind()

    def _after(self, unit, output):
        """After the unit's forward: gather again before its backward (a hook on each output that backward reaches
        first), and free it now unless it is the root (whose backward comes at once)."""
        if torch.is_grad_enabled():
            for t in _tensors(output):
                if t.requires_grad:
                    t.register_hook(lambda grad, unit=unit: self._before_backward(unit))
        if self._reshard and unit.module is not self._root:
            unit.free()

    def _before_backward(self, unit):
        self.gather(unit)
        unit.arrived = 0  # this backward's gradients are counted from here

    def gradient_arrived(self, tensor):
        """A post-accumulate-grad hook's news: once every parameter of the unit has its gradient, its backward is
        over and the unit is freed."""
        unit = self._owner[tensor]
        if not unit.gathered:  # its values during the forward were the placeholder's NaNs
            name = self._opt._order[tensor][0]
            raise RuntimeError(f"parameter '{name}' got a gradient while its FSDP unit ({type(unit.module).__name__}) "
                               "was not gathered: something used it outside that module's forward (as "
                               "MultiheadAttention uses out_proj's weights). Choose units (auto_wrap_policy) so that "
                               "it belongs to the module whose forward uses it")
        unit.arrived += 1
        if unit.gathered and unit.arrived == unit.expected:
            unit.free()

    def _state_dict_copied(self, state_dict, prefix):
        """The root's state_dict() gathered every unit: its parameters' entries become copies, then the units are
        freed (an entry left a view of a freed unit would read freed memory)."""
        with torch.no_grad():
            for unit in self.units:
                for p in unit.params:
                    key = prefix + self._names[id(p)]
                    if key in state_dict:
                        state_dict[key] = state_dict[key].clone()
        self.free_all()

    def free_all(self):
        for unit in self.units:
            if unit.gathered:
                unit.free()

    def gather_all(self):
        for unit in self.units:
            self.gather(unit)

    def remove_hooks(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []


def _tensors(value):
    """The tensors inside a forward's output (a tensor, or tuples, lists and dicts of them)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
