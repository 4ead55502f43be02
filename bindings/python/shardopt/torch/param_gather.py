"""ZeRO-1/2's parameter gathers overlapped with the next forward (shardopt.torch, overlap_param_gather=True).

After the update each rank holds new values for its shard only, and every bucket's parameters are allgathered. By
default step() returns once they all arrived. With overlap the library's step() returns as soon as it has issued
them (the option of the same name, docs/strategies.md); they run on its communication thread, bucket after bucket in
the order the update finished them, while the caller goes on. A forward pre-hook on each module that holds parameters
then waits for the buckets of its own parameters just before its forward reads them, so the first layers compute while
the last layers' parameters are still on the wire. For that the optimizer lays its buckets out in forward order
(parameter registration order): the first bucket gathered is the first one the forward needs.

A parameter must be read only by the forward of the module that holds it (shared parameters are refused at
construction anyway); anything else that reads parameters between step() and the next forward calls wait_all()
(state_dict, close, the checkpoint calls do)."""
from .. import shardopt_native as _n


class OverlappedGathers:
    def __init__(self, optimizer, module):
        self._opt, self._pending, self._hooks = optimizer, set(), []
        tensor_of, bucket_of = optimizer._tensor_of, optimizer._bucket_of
        for m in module.modules():
            own = [p for p in m.parameters(recurse=False) if id(p) in tensor_of]
            if own:
                buckets = tuple(sorted({bucket_of[tensor_of[id(p)]] for p in own}))
                self._hooks.append(m.register_forward_pre_hook(lambda mod, args, b=buckets: self.wait(b)))

    def issued(self):
        """step() returned with every bucket's gather in flight."""
        self._pending = set(range(self._opt._so.bucket_count))

    @property
    def pending(self):
        return frozenset(self._pending)

    def wait(self, buckets):
        for b in buckets:
            if b in self._pending:
                _n.shardopt_optimizer_gather(self._opt._so._h, b)  # returns once bucket b's parameters are whole
                self._pending.discard(b)

    def wait_all(self):
        self.wait(sorted(self._pending))

    def remove_hooks(self):
        for h in self._hooks:
            h.remove()
        self._hooks = []
