"""ShardedOptimizer: a torch.optim.Optimizer over the library's sharded optimizer (docs/torch.md).

The torch parameters' .data become views of the library's parameter memory (its flat buffer for DDP, ZeRO-1/2 and
Local SGD; the gathered units for FSDP) and their .grad views of its gradient buckets, so backward accumulates in
place where the library reduces. A post-accumulate-grad hook counts each bucket's gradients and, outside no_sync(),
starts the bucket's reduction (grad_ready) as soon as its last one arrived, overlapping the rest of backward."""
import contextlib
import hashlib
import os

import numpy as np
import torch

from .. import shardopt_native as _n
from .._core import set_checked
from ..backends import ReductionOperation
from ..configuration import ParameterLayout, ShardingConfiguration
from .. import optimizers as _opt
from .. import sharding as _sh
from .fsdp_units import FsdpUnits, assign_units, size_policy
from .param_gather import OverlappedGathers
from .placement import Placement, device_of

_STRATEGIES = {"ddp": _sh.DDPOptimizer, "zero1": _sh.ZeRO1Optimizer, "zero2": _sh.ZeRO2Optimizer,
               "fsdp": _sh.FSDPOptimizer, "zero3": _sh.FSDPOptimizer, "local_sgd": _sh.LocalSGDOptimizer,
               "localsgd": _sh.LocalSGDOptimizer}
# name: (the layer's optimizer class, the C kind whose defaults are torch.optim's)
_OPTIMIZERS = {"adamw": (_opt.AdamWOptimizer, _n.SHARDOPT_ADAMW), "adam": (_opt.AdamOptimizer, _n.SHARDOPT_ADAM),
               "sgd": (_opt.StochasticGradientDescentOptimizer, _n.SHARDOPT_SGD),
               "rmsprop": (_opt.RootMeanSquarePropagationOptimizer, _n.SHARDOPT_RMSPROP),
               "adagrad": (_opt.AdagradOptimizer, _n.SHARDOPT_ADAGRAD), "lamb": (_opt.LambOptimizer, _n.SHARDOPT_LAMB),
               "lion": (_opt.LionOptimizer, _n.SHARDOPT_LION), "nadam": (_opt.NadamOptimizer, _n.SHARDOPT_NADAM),
               "adamax": (_opt.AdaMaxOptimizer, _n.SHARDOPT_ADAMAX),
               "adadelta": (_opt.AdaDeltaOptimizer, _n.SHARDOPT_ADADELTA),
               "adafactor": (_opt.AdafactorOptimizer, _n.SHARDOPT_ADAFACTOR),
               "muon": (_opt.MuonOptimizer, _n.SHARDOPT_MUON)}
# torch's hyperparameter name: (the layer's setting, the C field of torch's default)
_HYPER = {"weight_decay": ("weight_decay", "weight_decay"), "momentum": ("momentum", "momentum"),
          "dampening": ("dampening", "dampening"), "nesterov": ("nesterov", "nesterov"),
          "eps": ("epsilon", "eps"), "amsgrad": ("amsgrad", "amsgrad"), "alpha": ("decay", "alpha"),
          "centered": ("centered", "centered"), "maximize": ("maximize", "maximize"),
          "lr_decay": ("learning_rate_decay", "lr_decay"),
          "initial_accumulator_value": ("initial_accumulator_value", "initial_accumulator_value"),
          "rho": ("rho", "rho"), "momentum_decay": ("momentum_decay", "momentum_decay"),
          "decoupled_weight_decay": ("decoupled_weight_decay", "decoupled_weight_decay"),
          "beta2_decay": ("beta2_decay", "beta2_decay"), "d": ("clip_threshold", "clip_threshold"),
          "ns_steps": ("newton_schulz_steps", "ns_steps"), "adjust_lr_fn": ("learning_rate_adjustment", "adjust_lr"),
          "state_precision": ("state_precision", "state_precision")}
# torch's tuple hyperparameters, spread over the layer's settings: Adafactor's eps = (eps1 or None, eps2) and
# Muon's ns_coefficients = (a, b, c).
_TUPLES = {"eps": ("epsilon", "epsilon2"), "ns_coefficients": ("newton_schulz_a", "newton_schulz_b", "newton_schulz_c")}
_DTYPES = {torch.float32: np.float32, torch.float64: np.float64}
# ZeRO-2 and FSDP: the library's gradient staging buffers (each the size of the largest bucket) a rank holds: the
# bucket backward is writing and the one before it, whose reduce-scatter runs meanwhile (docs/torch.md).
_STAGING_POOL = 2


def _params_of(module_or_params):
    """[(name, parameter)] and the param group's own hyperparameters, checked: leaves, no parameter twice."""
    group = {}
    if isinstance(module_or_params, torch.nn.Module):
        named = list(module_or_params.named_parameters(remove_duplicate=False))
    else:
        items = list(module_or_params)
        if items and isinstance(items[0], dict):
            if len(items) != 1:
                raise ValueError("shardopt.torch.ShardedOptimizer takes one parameter group (the library has one "
                                 f"learning rate and one set of hyperparameters per optimizer), not {len(items)}")
            group = dict(items[0])
            items = list(group.pop("params"))
            items = [items] if isinstance(items, torch.Tensor) else items
        named = [(f"param{i}", p) for i, p in enumerate(items)]
    seen, out = {}, []
    for name, p in named:
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"parameter '{name}' is a {type(p).__name__}, not a torch.Tensor")
        if id(p) in seen:
            raise ValueError(f"parameter '{name}' is the same tensor as '{seen[id(p)]}' (shared between modules): "
                             "shardopt keeps one copy of each parameter in its flat buffer, so a tied weight must be "
                             "registered once (tie it in forward instead)")
        seen[id(p)] = name
        if p.requires_grad:
            out.append((name, p))
    if not out:
        raise ValueError("no parameters that require grad were given")
    device_of(out)  # one device, CPU or CUDA (before the storage checks: a meta tensor has no storage)
    storages = {}
    for name, p in out:
        if not p.is_leaf:
            raise ValueError(f"parameter '{name}' is not a leaf tensor (it was computed from others: grad_fn "
                             f"{type(p.grad_fn).__name__}); pass the leaves (nn.Parameter) the model is built from")
        if p.is_sparse or p.layout != torch.strided:
            raise ValueError(f"parameter '{name}' has layout {p.layout}: dense (strided) tensors only")
        if p.dtype not in _DTYPES:
            raise ValueError(f"parameter '{name}' is {p.dtype}: float32 or float64 only")
        if not p.numel():
            raise ValueError(f"parameter '{name}' has no elements")
        key = p.untyped_storage().data_ptr()
        if key in storages:
            raise ValueError(f"parameters '{storages[key]}' and '{name}' share memory (one is a view of the other): "
                             "each parameter must own its storage")
        storages[key] = name
    dtypes = {p.dtype for _, p in out}
    if len(dtypes) != 1:
        raise ValueError(f"the parameters mix {sorted(map(str, dtypes))}: one element type per optimizer")
    return out, group


def _elastic_options(checkpoint_dir, checkpoint_every, min_workers, max_workers):
    """The library's elastic options, each checked by it as it is set (None: its default)."""
    e = _n.shardopt_elastic_options()
    _n.shardopt_elastic_options_init(e)
    for field, value in {"min_workers": min_workers, "max_workers": max_workers,
                         "checkpoint_every": checkpoint_every}.items():
        if value is not None:
            set_checked(e, field, value, field, _n.shardopt_elastic_options_validate_strict)
    e.checkpoint_dir = None if checkpoint_dir is None else os.fsdecode(os.fspath(checkpoint_dir))
    return e


def _check_same_everywhere(backend, named, dtype):
    """MismatchError-like ValueError when the ranks' parameters differ in names, shapes or dtype."""
    if backend.world_size == 1:
        return
    h = hashlib.sha256(repr([(n, tuple(p.shape)) for n, p in named] + [str(dtype)]).encode()).digest()
    mine = np.array([int.from_bytes(h[:6], "little"), len(named), sum(p.numel() for _, p in named)], np.float64)
    lo, hi = backend.all_reduce(mine.copy(), ReductionOperation.MIN), backend.all_reduce(mine.copy(),
                                                                                        ReductionOperation.MAX)
    if not np.array_equal(lo, hi):
        raise ValueError(f"the model's parameters differ across ranks: rank {backend.rank} has {len(named)} tensors "
                         f"of {int(mine[2])} elements ({dtype}), and the ranks' names, shapes or dtypes differ "
                         f"(tensors {int(lo[1])}..{int(hi[1])}, elements {int(lo[2])}..{int(hi[2])}): every rank must "
                         "build the same model")


class ShardedOptimizer(torch.optim.Optimizer):
    """ShardedOptimizer(module_or_params, optimizer="adamw", lr=1e-3, strategy="zero2", backend=None, **options)

    module_or_params: an nn.Module (its parameters that require grad), an iterable of parameters, or one param
    group dict. optimizer: adamw, adam, sgd, rmsprop, adagrad, lamb, lion, nadam, adamax, adadelta, adafactor, muon
    (torch.optim's formulas and defaults; Lion's as its paper's); hyperparameters as torch names them (betas, eps,
    weight_decay, momentum, nesterov, rho, d, ns_coefficients, adjust_lr_fn, ...), and state_precision ("8bit",
    "4bit": Adam's, AdamW's and SGD's moments quantized, docs/optimizers.md). strategy: ddp, zero1,
    zero2, fsdp (zero3), local_sgd. backend: None (UCX from the launcher's environment, or a world of one), "ucx",
    or a shardopt CommunicationBackend (InMemoryCommunicationBackend: ranks as threads); a model on a GPU: None (NCCL,
    one GPU per rank) or "staged" (device buffers over UCX, ranks sharing a GPU), the library's CUDA memory on torch's
    current stream, f32 (placement.py). Other options:
    max_grad_norm (global-norm clipping across shards at each step), bucket_cap_mb (25), overlap (start each
    bucket's reduction during backward; True), compression ("int8", "top_k", ...), and any field of the library's
    sharding options (update_threads, local_sgd_period, ...). FSDP over a module gathers per unit (fsdp_units.py):
    auto_wrap_policy (torch FSDP's signature, e.g. size_based_auto_wrap_policy or transformer_auto_wrap_policy with
    their arguments bound), by default each submodule holding at least min_unit_params (1M) parameters its own units
    did not take; reshard_after_forward (True) frees a unit after its forward and gathers it again for its backward.
    overlap_param_gather (ZeRO-1/2 over a module; False): step() returns with the parameter gathers in flight and
    each module's forward waits for its own parameters (param_gather.py), so the gathers overlap the next forward.
    Between steps its parameters hold no memory: read them inside summon_full_params(). Every rank must run the
    same forwards and backwards (each gather is a collective). Collective: every rank constructs it alike.

    Elastic (docs/torch.md, docs/elastic.md): checkpoint_dir= (or elastic=True with $SHARDOPT_CHECKPOINT_DIR) makes
    the library's ElasticOptimizer of it: a sharded checkpoint every checkpoint_every steps, written while training
    goes on, and at construction the resume from the latest one in the directory at this world size (resharded);
    train on from step_count. min_workers / max_workers bound the world size it accepts."""

    def __init__(self, module_or_params, optimizer="adamw", lr=1e-3, strategy="zero2", backend=None, *,
                 betas=None, max_grad_norm=0.0, bucket_cap_mb=25, overlap=True, compression=None,
                 auto_wrap_policy=None, min_unit_params=1_000_000, reshard_after_forward=True,
                 overlap_param_gather=False, elastic=None,
                 checkpoint_dir=None, checkpoint_every=None, min_workers=None, max_workers=None, **options):
        named, group = _params_of(module_or_params)
        if optimizer not in _OPTIMIZERS:
            raise ValueError(f"unknown optimizer {optimizer!r} (one of {', '.join(_OPTIMIZERS)})")
        if strategy not in _STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r} (one of {', '.join(_STRATEGIES)})")
        lr = group.pop("lr", lr)
        betas = group.pop("betas", betas)
        hyper = {k: options.pop(k) for k in list(options) if k in _HYPER or k in _TUPLES}
        hyper.update({k: group.pop(k) for k in list(group) if k in _HYPER or k in _TUPLES})
        if group:
            raise TypeError(f"unknown param group keys {sorted(group)}")
        cls, kind = _OPTIMIZERS[optimizer]
        torch_defaults = _n.shardopt_optimizer_options()
        _n.shardopt_optimizer_options_defaults(kind, torch_defaults)
        settings = {setting: hyper.get(name, getattr(torch_defaults, field))
                    for name, (setting, field) in _HYPER.items()}
        for name, targets in _TUPLES.items():
            value = settings.get(targets[0]) if name == "eps" else hyper.get(name)
            if isinstance(value, (tuple, list)):
                if len(value) != len(targets):
                    raise ValueError(f"{name} takes {len(targets)} values, got {tuple(value)}")
                settings.update({t: 0.0 if v is None else v for t, v in zip(targets, value)})  # eps1 None: 0
        if betas is None:
            betas = (torch_defaults.beta1, torch_defaults.beta2)
        settings["beta1"], settings["beta2"] = float(betas[0]), float(betas[1])
        wrapped = cls(learning_rate=float(lr), **settings)

        self._placement = Placement(device_of(named))
        self._backend, self._own_backend = self._placement.backend(backend)
        try:
            self._dtype = next(iter(named))[1].dtype
            if Placement.host_collectives(self._backend):
                _check_same_everywhere(self._backend, named, self._dtype)
            self._np_dtype = np.dtype(_DTYPES[self._dtype])

            if overlap_param_gather and (strategy not in ("zero1", "zero2") or not isinstance(module_or_params,
                                                                                                torch.nn.Module)):
                raise ValueError("overlap_param_gather overlaps ZeRO-1/2's parameter gathers with the next forward, "
                                 "module by module: it needs strategy 'zero1' or 'zero2' and an nn.Module")
            # backward order (as DDP buckets): the last layer's gradients come first; with the parameter gathers
            # overlapping the forward, forward order (the first bucket updated and gathered is the first one needed)
            order = list(named) if overlap_param_gather else list(reversed(named))
            # FSDP over a module: units from its tree (fsdp_units.py), each one or more whole buckets
            per_unit = _STRATEGIES[strategy] is _sh.FSDPOptimizer and isinstance(module_or_params, torch.nn.Module)
            if per_unit:
                policy = auto_wrap_policy or size_policy(int(min_unit_params))
                unit_modules, unit_of = assign_units(module_or_params, order, policy)
            layout = ParameterLayout(self._np_dtype)
            for t, (name, p) in enumerate(order):
                if per_unit and t > 0 and unit_of[t] != unit_of[t - 1]:
                    layout.end_bucket()
                if p.dim() == 2:
                    layout.add_matrix(name, p.shape[0], p.shape[1])
                else:
                    layout.add(name, p.numel())
            config = ShardingConfiguration(self._backend)
            self._placement.configure(config)
            if overlap_param_gather:
                config._s.overlap_param_gather = _n.SHARDOPT_ENABLE
            group_elems = max(1, int(bucket_cap_mb * 2 ** 20) // self._np_dtype.itemsize)
            config.minimum_parameter_group_size = group_elems
            if max_grad_norm:
                config.max_grad_norm = float(max_grad_norm)
            if compression is not None:
                config.enable_gradient_compression = True
                config.gradient_compression = compression
            # Sharded gradients (ZeRO-2, FSDP) go through the library's staging buffers, one per bucket being written:
            # a bounded pool. A bucket takes one when backward first hands it a gradient and gives it back once its
            # reduce-scatter is done; a gradient whose bucket finds the pool full of buckets still being written stays
            # torch's own until one is free (or until step()), so no order of backward, unused parameter or no_sync()
            # ever needs more (_grad_accumulated).
            self._pooled = _STRATEGIES[strategy] in (_sh.ZeRO2Optimizer, _sh.FSDPOptimizer)
            if self._pooled:
                options.setdefault("staging_buffers", _STAGING_POOL)
            for field, value in options.items():
                public = getattr(ShardingConfiguration, field, None)
                if isinstance(public, property) or hasattr(public, "__set__"):
                    setattr(config, field, value)
                elif hasattr(config._s, field) and field not in ("struct_size", "strategy", "memory", "cuda_stream"):
                    set_checked(config._s, field, value, field, _n.shardopt_sharding_options_validate_strict)
                else:
                    raise TypeError(f"unknown option {field!r}")

            initial = self._placement.host_copy([p for _, p in order], self._np_dtype)
            if not self._placement.cuda:
                # the parameters become views of that copy until they are the library's (_bind_parameters): torch's own
                # storage is freed now, not held beside the library's buffer through its creation (peak memory). (CUDA:
                # torch's caching allocator would keep what is freed, so the parameters stay as they are until bound.)
                packed, at = torch.from_numpy(initial), 0
                with torch.no_grad():
                    for _, p in order:
                        p.data, at = packed[at:at + p.numel()].view(p.shape), at + p.numel()
                del packed
            self._so = _STRATEGIES[strategy](wrapped, config)
            elastic = checkpoint_dir is not None if elastic is None else bool(elastic)
            if elastic:  # the library's schedule and resume, made part of the collective creation
                e = _elastic_options(checkpoint_dir, checkpoint_every, min_workers, max_workers)
                self._so._created = lambda handle: _n.shardopt_optimizer_make_elastic(handle, e)
            elif (checkpoint_every, min_workers, max_workers) != (None, None, None):
                raise TypeError("checkpoint_every, min_workers and max_workers are elastic options: pass "
                                "checkpoint_dir= (or elastic=True)")
            self._so.initialize(layout, initial)
            self._elastic = elastic
            # the layer keeps (layout, initial) for its reset(), which this class does not offer: a copy of every
            # parameter (400 MB per rank at 100M f32) freed here
            self._so._init, initial = None, None
            layout.close()
            self._strategy, self._fsdp = strategy, _STRATEGIES[strategy] is _sh.FSDPOptimizer
            self._order, self._max_grad_norm = order, float(max_grad_norm)
            if not self._fsdp:  # the parameters the library's now, and the copy freed before anything else is allocated
                self._units = None
                self._bind_parameters()
            self._tensor_of = {id(p): t for t, (_, p) in enumerate(order)}
            given = {id(p): i for i, (_, p) in enumerate(named)}
            self._torch_index = [given[id(p)] for _, p in order]  # torch's index: the order the parameters were given
            self._names = [n for n, _ in named]
            self._bucket_of = [self._so.tensor_bucket(t) for t in range(len(order))]
            self._per_bucket = np.bincount(self._bucket_of, minlength=self._so.bucket_count).tolist()
            self._bucket_tensors = [[] for _ in range(self._so.bucket_count)]
            for t, b in enumerate(self._bucket_of):
                self._bucket_tensors[b].append(t)
            self._pool = int(options.get("staging_buffers", 1)) if self._pooled else 0
            self._overlap, self._no_sync_depth, self._last = bool(overlap), 0, None
            self._lr_set = float(lr) if not self._elastic or self._so.step_count == 0 else self._so.learning_rate
            self._grad_views, self._cached_views, self._gathered = [None] * len(order), {}, False
            params = [p for _, p in named]
            super().__init__([{"params": params, "lr": self._lr_set, "betas": tuple(betas), **hyper}],
                             {"lr": float(lr)})
            self._units = FsdpUnits(self, unit_modules, unit_of, reshard_after_forward) if per_unit else None
            if self._fsdp:  # the other strategies' parameters were bound above, as soon as the library held them
                self._bind_parameters()
            self._begin()
            self._hooks = [p.register_post_accumulate_grad_hook(self._grad_accumulated) for _, p in order]
            self._gathers = OverlappedGathers(self, module_or_params) if overlap_param_gather else None
        except BaseException:  # what this construction made is closed now, not whenever the collector finds it
            self._abandon()
            raise

    def _abandon(self):
        """A construction that failed: what it made so far is closed, as close() does, but with no collective (the
        other ranks may not have failed); a backend the caller gave stays open."""
        self._remove_hooks()
        if hasattr(self, "_order"):  # set once the library holds the parameters: they may be views of its memory
            self._detach_parameters()
        self._close_native()

    def _remove_hooks(self):
        for h in getattr(self, "_hooks", ()):
            h.remove()
        for owner in (getattr(self, "_gathers", None), getattr(self, "_units", None)):
            if owner is not None:
                owner.remove_hooks()

    def _detach_parameters(self):
        """Every parameter becomes torch's copy of its values, with no gradient (both may be views of the library's
        memory)."""
        with torch.no_grad():
            for _, p in self._order:
                p.data = p.data.clone()
                p.grad = None

    def _close_native(self):
        """The native optimizer, if made, and the backend, if this optimizer made it (a UCX world holds a listening
        port and progress threads)."""
        if getattr(self, "_so", None) is not None:
            self._so.close()
            self._so = None
        if self._own_backend:
            self._backend.close()

    # ---- views of library memory ----
    def _view(self, address, count, shape):
        """A torch tensor over `count` elements of library memory at `address` (host or CUDA, placement.py); it
        keeps the native optimizer alive (the layer's view holds its owner)."""
        return self._placement.view(self._so._view(address, count)).view(shape)

    def _bind_parameters(self):
        """p.data = a view of the library's parameters (FSDP over parameters: of the gathered units, gathered here;
        over a module: of its units' flat tensors, bound once, which its hooks gather)."""
        so = self._so
        if self._units is not None:
            return
        if self._fsdp and not self._gathered:
            for b in range(so.bucket_count):
                _n.shardopt_optimizer_gather(so._h, b)
            self._gathered = True
        for t, (_, p) in enumerate(self._order):
            address = _n.shardopt_optimizer_tensor_parameters(so._h, t)
            if p.data.data_ptr() != address or not p.data.is_contiguous():
                p.data = self._view(address, p.numel(), p.shape)

    def _release_units(self):
        if self._units is not None:
            self._units.free_all()  # stale once the library steps, loads or closes
            return
        if self._fsdp and self._gathered:
            for b in range(self._so.bucket_count):
                _n.shardopt_optimizer_release(self._so._h, b)
            self._gathered = False

    def _begin(self):
        """A new micro-step in the library: its buckets opened (zeroed), the grad views bound to them. Pooled
        (ZeRO-2, FSDP): nothing is opened until backward reaches a bucket (_bind); p.grad is None."""
        so = self._so
        so.zero_grad()
        nb = so.bucket_count
        self._arrived = [0] * nb
        self._ready = [False] * nb
        self._fresh = True
        if self._pooled:
            self._bound = [None] * nb  # the staging buffer (its address) a bucket has taken in this micro-step
            self._open = 0             # buckets holding a staging buffer, not yet marked ready
            self._pending = []         # buckets whose gradients are all there, waiting for a staging buffer
            self._grad_views = [None] * len(self._order)
            for _, p in self._order:
                p.grad = None
            return
        for b in range(nb):
            _n.shardopt_optimizer_bucket_grad(so._h, b)
        for t, (_, p) in enumerate(self._order):
            address, count = _n.shardopt_optimizer_tensor_grad(so._h, t)
            v = self._grad_views[t]
            if v is None or v.data_ptr() != address:
                self._grad_views[t] = self._view(address, count, p.shape)
            if p.grad is not None:
                p.grad = self._grad_views[t]

    def _bind(self, b):
        """Pooled: bucket b takes a staging buffer (the library recycles the one whose reduction was issued first,
        waiting for that reduction); its tensors' grad views are bound there, and the gradients torch held for them
        so far copied in. The bucket that had this buffer before loses its views (p.grad None)."""
        so, views = self._so, self._grad_views
        address, _ = _n.shardopt_optimizer_bucket_grad(so._h, b)
        for other, at in enumerate(self._bound):
            if at == address:  # recycled: its reduced shard is in the library, its views are another's now
                self._bound[other] = None
                for t in self._bucket_tensors[other]:
                    p = self._order[t][1]
                    if p.grad is not None and p.grad.data_ptr() == views[t].data_ptr():
                        p.grad = None
                    views[t] = None
        self._bound[b] = address
        self._open += 1
        for t in self._bucket_tensors[b]:
            p = self._order[t][1]
            at, count = _n.shardopt_optimizer_tensor_grad(so._h, t)
            v = self._cached_views.get(t)
            if v is None or v.data_ptr() != at:
                v = self._cached_views[t] = self._view(at, count, p.shape)
            views[t] = v
            if p.grad is not None:
                v.copy_(p.grad.reshape(v.shape))
                p.grad = v

    def _mark_ready(self, b):
        """Bucket b's gradients are final in this micro-step: its reduction starts. Pooled: a bucket not holding a
        staging buffer takes one first (or waits in _pending while every buffer holds a bucket still written)."""
        if self._pooled and self._bound[b] is None and self._open >= self._pool:
            self._pending.append(b)
            return
        self._start_reduction(b)
        while self._pooled and self._pending and self._open < self._pool:
            self._start_reduction(self._pending.pop(0))

    def _start_reduction(self, b):
        if self._pooled:
            if self._bound[b] is None:
                self._bind(b)
            self._open -= 1  # its buffer is the reduction's now, no longer being written
        self._ready[b] = True
        self._so.grad_ready(b)

    def _grad_accumulated(self, p):  # post-accumulate-grad hook: p.grad holds this backward's sum
        t = self._tensor_of[id(p)]
        b = self._bucket_of[t]
        if self._ready[b] or (self._pooled and b in self._pending):
            raise RuntimeError(f"a second backward reached parameter '{self._order[t][0]}' after its bucket's "
                               "reduction started: call step() (or zero_grad()) between backward passes, or run "
                               "the earlier ones under optimizer.no_sync()")
        self._fresh = False
        if self._pooled and self._bound[b] is None and self._open < self._pool:
            self._bind(b)
        view = self._grad_views[t]
        if view is not None and p.grad is not view:  # else (pooled, no staging buffer free): torch's own for now
            if p.grad.data_ptr() != view.data_ptr():
                view.copy_(p.grad)  # the first gradient after zero_grad(set_to_none=True)
            p.grad = view
        if self._overlap and not self._no_sync_depth:
            self._arrived[b] += 1
            if self._arrived[b] == self._per_bucket[b]:
                self._mark_ready(b)
        if self._units is not None:
            self._units.gradient_arrived(t)

    # ---- torch.optim.Optimizer ----
    @contextlib.contextmanager
    def summon_full_params(self):
        """Collective: inside, every parameter holds its full current values (FSDP over a module frees its units
        between uses; the other strategies hold them anyway, once overlapped gathers arrived). Read-only: changes are
        not written back."""
        if self._units is None:
            self._params_whole()
            yield
            return
        with torch.no_grad():
            self._units.gather_all()
        try:
            yield
        finally:
            self._units.free_all()

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate gradients in place with no communication (torch DDP's no_sync);
        the next backward outside it starts the reductions of the summed gradients."""
        self._no_sync_depth += 1
        try:
            yield
        finally:
            self._no_sync_depth -= 1

    def zero_grad(self, set_to_none=True):
        if not self._fresh:
            self._begin()
        for t, (_, p) in enumerate(self._order):
            if set_to_none:
                p.grad = None
            elif self._pooled:  # zeros of torch's, handed to the buckets as backward reaches them
                p.grad = torch.zeros_like(p)
            else:
                p.grad = self._grad_views[t]

    @torch.no_grad()
    def step(self, closure=None):
        """Collective: one step of the library's optimizer (reduction of the buckets not yet started, the update
        of this rank's part, the parameter gather). Returns the closure's loss when one is given."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        lr = float(self.param_groups[0]["lr"])
        if lr != self._lr_set:
            self._so.learning_rate = self._lr_set = lr
        for t, (_, p) in enumerate(self._order):  # gradients the user set by hand
            g, view = p.grad, self._grad_views[t]
            if g is not None and g is not view and (view is None or g.data_ptr() != view.data_ptr()):
                if self._ready[self._bucket_of[t]]:
                    raise RuntimeError(f"parameter '{self._order[t][0]}': its gradient was replaced after its "
                                       "bucket's reduction started")
                if view is not None:  # else (pooled) the bucket takes it as it takes a staging buffer, below
                    view.copy_(g.reshape(view.shape))
        if self._pooled:  # every bucket's reduction, within the pool: those holding a buffer first
            order = [b for b in range(len(self._ready)) if self._bound[b] is not None and not self._ready[b]]
            order += [b for b in range(len(self._ready)) if self._bound[b] is None and not self._ready[b]
                      and b not in self._pending]
            for b in order:
                self._mark_ready(b)
        self._release_units()
        self._last = self._so.step()
        if self._gathers is not None:
            self._gathers.issued()  # the parameters' addresses stay; their modules' forwards wait for them
        else:
            self._bind_parameters()
        self._begin()
        return loss

    def _params_whole(self):
        """Waits for the parameter gathers step() left in flight (overlap_param_gather)."""
        if getattr(self, "_gathers", None) is not None:
            self._gathers.wait_all()

    def clip_grad_norm_(self, max_norm, norm_type=2.0):
        """Global-norm clipping across shards happens inside step() (the library computes the norm of the averaged
        gradient over every shard): pass max_grad_norm= at construction. Kept for torch's idiom: checks that
        max_norm is that value; returns the norm (before clipping) of the last step's gradient, or None."""
        if float(norm_type) != 2.0:
            raise ValueError("shardopt clips by the global 2-norm only")
        if float(max_norm) != self._max_grad_norm:
            raise ValueError(f"clip_grad_norm_({max_norm}): this optimizer clips at max_grad_norm="
                             f"{self._max_grad_norm or None} in step(), across shards; pass max_grad_norm="
                             f"{max_norm} when constructing it")
        return None if self._last is None else torch.tensor(self._last.grad_norm)

    @property
    def last_step(self):
        """The library's StepResult of the last step (grad_norm, applied, skipped_nonfinite, timings, bytes)."""
        return self._last

    # ---- checkpoints: the library's (reshardable to any world size and strategy) ----
    def state_dict(self):
        """Collective: the consolidated checkpoint (the same bytes on every rank, loadable at any world size and
        strategy) with torch's param_groups; torch.save writes it."""
        self._params_whole()
        groups = [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]
        for g in groups:
            g["params"] = list(range(len(self._order)))
        return {"state": {}, "param_groups": groups,
                "shardopt": {"checkpoint": bytes(self._so.serialize()), "world_size": self._backend.world_size,
                             "strategy": self._strategy, "names": list(self._names)}}

    def load_state_dict(self, state_dict):
        """Collective: loads state_dict()'s checkpoint, saved at any world size and strategy."""
        so_state = state_dict.get("shardopt") if isinstance(state_dict, dict) else None
        if not so_state or "checkpoint" not in so_state:
            raise ValueError("not a shardopt.torch state_dict (it has no 'shardopt' checkpoint): load a plain "
                             "torch.optim state_dict into a torch optimizer")
        self._params_whole()
        self._release_units()
        self._so.deserialize(so_state["checkpoint"])
        for g, saved in zip(self.param_groups, state_dict.get("param_groups", [])):
            g.update({k: v for k, v in saved.items() if k != "params"})
        self._lr_set = None
        self._bind_parameters()
        self._begin()

    def save(self, path, consolidated=False):
        """Collective: the library's checkpoint directory (every rank its shard, or one consolidated file)."""
        self._params_whole()
        self._release_units()
        self._so.save_model(path, consolidated)
        self._bind_parameters()

    def load(self, path):
        """Collective: loads a checkpoint directory of either form, saved at any world size and strategy."""
        self._params_whole()
        self._release_units()
        self._so.load_model(path)
        self.param_groups[0]["lr"] = self._lr_set = self._so.learning_rate
        self._bind_parameters()
        self._begin()

    def consolidated_state_dict(self):
        """Collective: what torch.optim's matching optimizer (AdamW for adamw, SGD, Adam, RMSprop, Adagrad, Adamax,
        Adadelta) would hold in one process after the same steps: {"state": {i: {"step", "exp_avg", ...}},
        "param_groups": [...]}, each state tensor whole and shaped as its parameter, i in the order of the
        parameters given. torch.save it; torch.optim.AdamW(model.parameters()).load_state_dict(it) trains on in plain
        torch. The library names the state as shardopt-ckpt export does (shardopt_checkpoint_describe). The same on
        every rank. The module's parameters: model.state_dict() (a collective under FSDP over a module, whose units
        hold nothing between steps)."""
        self._params_whole()
        self._release_units()
        try:
            blob = bytes(self._so.serialize())
        finally:
            self._bind_parameters()
        info = _n.shardopt_checkpoint_info()
        _n.shardopt_checkpoint_describe(blob, info)
        cls = getattr(torch.optim, info.torch_optimizer, None) if info.torch_optimizer else None
        if cls is None:
            raise ValueError(f"no torch.optim optimizer keeps {info.optimizer}'s state (slots "
                             f"{info.state_names or 'none'}): export the library's checkpoint (state_dict(), save()) "
                             "or its safetensors (shardopt.ckpt.export) instead")
        if info.tensor_count != len(self._order) or info.element_count != sum(p.numel() for _, p in self._order):
            raise RuntimeError(f"the checkpoint has {info.tensor_count} tensors of {info.element_count} elements, "
                               f"this optimizer {len(self._order)} of {sum(p.numel() for _, p in self._order)}")
        names = info.state_names.split(",") if info.state_slots else []
        counts = [p.numel() for _, p in self._order]
        slots = []
        for k in range(info.state_slots):  # each slot packed in the library's order (self._order)
            packed = np.empty(info.element_count, self._np_dtype)
            _n.shardopt_checkpoint_read(blob, k, packed)
            slots.append(torch.from_numpy(packed).split(counts))
        # torch's dtype of "step" (torch.optim.optimizer._get_scalar_dtype)
        scalar = torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32
        n, state = len(self._order), {}
        for t, (_, p) in enumerate(self._order):
            i = self._torch_index[t]
            entry = {"step": torch.tensor(float(info.step_count), dtype=scalar)} if info.torch_step else {}
            entry.update({name: slots[k][t].view(p.shape).to(p.device, copy=True) for k, name in enumerate(names)})
            state[i] = entry
        group = {k: v for k, v in cls([torch.nn.Parameter(torch.zeros(1))]).param_groups[0].items() if k != "params"}
        group.update({k: v for k, v in self.param_groups[0].items() if k not in ("params", "state_precision")})
        if "betas" in group:
            group["betas"] = tuple(group["betas"])
        group["params"] = list(range(n))
        return {"state": dict(sorted(state.items())), "param_groups": [group]}

    # ---- elastic (checkpoint_dir=): the library's ElasticOptimizer ----
    def _elastic_status(self):
        if not self._elastic:
            raise RuntimeError("not elastic: construct it with checkpoint_dir= (or elastic=True)")
        st = _n.shardopt_elastic_status()
        _n.shardopt_optimizer_elastic_status(self._so._h, st)
        return st

    step_count = property(lambda self: self._so.step_count, doc="steps taken (a resumed run: from the checkpoint's)")
    resumed_step = property(lambda self: self._elastic_status().resumed_step,
                            doc="the step count the construction resumed from; -1: no checkpoint was there")
    last_checkpoint_step = property(lambda self: self._elastic_status().last_checkpoint_step, doc="-1: none")
    generation = property(lambda self: self._elastic_status().generation,
                          doc="restarts before this run (shardopt-run --elastic's generation, torchrun's restarts)")

    def checkpoint(self):
        """Collective (elastic): a checkpoint now, at a step boundary, written while training goes on."""
        self._elastic_status()
        self._release_units()
        try:
            _n.shardopt_optimizer_checkpoint_now(self._so._h)
        finally:
            self._bind_parameters()

    def finish_checkpoint(self):
        """Collective (elastic): waits for the checkpoint being written and publishes it (call it at the end)."""
        self._elastic_status()
        _n.shardopt_optimizer_finish_checkpoint(self._so._h)

    # ---- the rest ----
    rank = property(lambda self: self._backend.rank)
    world_size = property(lambda self: self._backend.world_size)
    backend = property(lambda self: self._backend)
    memory_stats = lambda self: self._so.memory_stats()  # noqa: E731

    def close(self):
        """Detaches the parameters (copies of their values) and frees the library's optimizer."""
        if getattr(self, "_so", None) is None:
            return
        self._remove_hooks()
        if self._gathers is not None:
            self._gathers.wait_all()
        if self._units is not None:
            self._units.gather_all()
        self._detach_parameters()
        self._release_units()
        self._close_native()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"shardopt.torch.ShardedOptimizer({self._strategy}, {len(self._order)} tensors, "
                f"rank {self.rank} of {self.world_size}, lr {self.param_groups[0]['lr']})")
