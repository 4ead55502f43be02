"""The planner (docs/planning.md): which strategies fit a model on a cluster, fastest first, with their memory and
time (plan, over shardopt_plan_create), and what one rank of a job would hold (rank_memory, over
shardopt_plan_rank_memory: equal to that rank's memory_stats())."""
from . import shardopt_native as _n
from .configuration import MemoryStats, ParameterLayout, _record

Plan = _record(
    "Plan", "name fits strategy hybrid_data_strategy pipeline_parallel_size tensor_parallel_size data_parallel_size "
    "hsdp_replicas params_bytes grads_bytes optimizer_state_bytes buffer_bytes compression_bytes host_params_bytes "
    "host_grads_bytes host_optimizer_state_bytes device_bytes host_bytes sent_intra_bytes sent_inter_bytes step_seconds "
    "compute_seconds exposed_comm_seconds update_seconds post_update_seconds bubble_seconds tensor_comm_seconds "
    "reduce_comm_seconds", "One candidate of plan() (shardopt_plan_entry): bytes per rank, bytes sent per step, the "
    "predicted step and its parts.")

_STRATEGIES = {"ddp": _n.SHARDOPT_DDP, "zero1": _n.SHARDOPT_ZERO1, "zero2": _n.SHARDOPT_ZERO2, "fsdp": _n.SHARDOPT_FSDP,
               "local_sgd": _n.SHARDOPT_LOCAL_SGD}


def plan(parameters=None, layout=None, *, hosts=0, ranks_per_host=0, gpus=False, device_memory=0, host_memory=0,
         intra_bandwidth=0.0, intra_latency=0.0, inter_bandwidth=0.0, inter_latency=0.0, update_bandwidth=0.0,
         profile=None, compute_seconds=0.0, sequence=0, micro_batch=0, reserve_bytes=0, optimizer=None):
    """The strategies the library can run there, those that fit first, fastest first: a list of Plan. The model is
    `parameters` (a transformer of that many) or a ParameterLayout; gpus=True: one GPU of device_memory bytes per
    rank; 0 (or None) means the library's default, or the profile's (a JSON text from ./dev bench calibrate);
    optimizer: an OptimizerOptions (None: Adam)."""
    request, cluster = _n.shardopt_plan_request(), _n.shardopt_plan_cluster()
    if layout is not None:
        if not isinstance(layout, ParameterLayout):
            raise TypeError(f"layout must be a ParameterLayout, not {type(layout).__name__}")
        request.layout = layout._handle
    request.parameters = float(parameters or 0)
    request.compute_seconds, request.sequence, request.micro_batch = float(compute_seconds), sequence, micro_batch
    request.reserve_bytes = int(reserve_bytes)
    if optimizer is not None:
        request.optimizer = optimizer._optimizer
    cluster.hosts, cluster.ranks_per_host = hosts, ranks_per_host
    cluster.memory = _n.SHARDOPT_MEMORY_CUDA if gpus else _n.SHARDOPT_MEMORY_HOST
    cluster.device_memory_bytes, cluster.host_memory_bytes = int(device_memory), int(host_memory)
    cluster.intra_bandwidth, cluster.intra_latency = float(intra_bandwidth), float(intra_latency)
    cluster.inter_bandwidth, cluster.inter_latency = float(inter_bandwidth), float(inter_latency)
    cluster.update_bandwidth = float(update_bandwidth)
    if profile is not None:
        cluster.profile_json = profile
    handle = _n.shardopt_plan_create(request, cluster)
    try:
        count, _ = _n.shardopt_plan_count(handle)
        plans = []
        for i in range(count):
            e = _n.shardopt_plan_entry()
            _n.shardopt_plan_entry_get(handle, i, e)
            plans.append(Plan.of(e)._replace(fits=bool(e.fits)))
        return plans
    finally:
        _n.shardopt_plan_destroy(handle)


def rank_memory(layout, strategy, world_size, rank, optimizer=None, configuration=None):
    """What world rank `rank` of `world_size` ranks would hold once it has run a step, for a ParameterLayout under
    strategy "ddp", "zero1", "zero2", "fsdp" or "local_sgd", with a ShardingConfiguration's options (None: its
    create_default's) and an OptimizerOptions (None: Adam): a MemoryStats equal to that rank's memory_stats()."""
    if strategy not in _STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(_STRATEGIES)} (got {strategy!r})")
    sharding, m = _n.shardopt_sharding_options(), _n.shardopt_memory_stats()
    if configuration is not None:
        sharding = configuration._s.copy()
    else:
        _n.shardopt_sharding_options_init_preset(sharding, sharding.struct_size, _n.SHARDOPT_SHARDING_DEFAULT)
    sharding.strategy = _STRATEGIES[strategy]
    _n.shardopt_plan_rank_memory(layout._handle, optimizer._optimizer if optimizer is not None else None, sharding,
                                 world_size, rank, m)
    return MemoryStats.of(m)
