"""shardopt.elastic_agent: shardopt-run --elastic, a job that goes on at another world size when a
rank dies or a host is cut off (docs/elastic.md). shardopt.run's launcher hands --elastic jobs here.

  coordinator, on the master host (runs L ranks here):
    shardopt-run --elastic --min N --max M -n L [--hosts H --listen ADDR:PORT --token T]
                 [--checkpoint-dir D] [--max-restarts R] [--join-timeout S] [--heartbeat S]
                 [--heartbeat-timeout S] [--stop-timeout S] [--timeout S] -- PROGRAM ARGS
  agent, on every other host (runs the ranks the coordinator gives it, up to L):
    shardopt-run --elastic --join ADDR:PORT --token T -n L [--heartbeat S] [--heartbeat-timeout S]
                 [--join-timeout S] -- PROGRAM ARGS

The coordinator waits (at most --join-timeout) for H-1 agents, then runs generation 0 on every
slot (at most --max). Each generation is a fresh job: a new rendezvous port and token, ranks
numbered from 0 over the slots in order (the coordinator's first, rank 0 among them when it has
one), SHARDOPT_ELASTIC_GENERATION set. When a rank fails or a host stops answering, the
generation ends: the coordinator stops every rank, retires what failed and starts the next
generation on what is left, each rank resuming from the last checkpoint (ElasticOptimizer). What
is retired: every slot of a host that is gone (its agent did not answer within the heartbeat
timeout); when no host is gone, the slot of the rank that failed first (the survivors fail after
it, with peer_lost). A host that joins while a generation runs waits for the next restart; its
slots then replace retired ones or add to the world, up to --max. Fewer than --min slots left,
more than --max-restarts restarts, or --timeout: the job fails, saying why.

Control messages are JSON lines over TCP; both ends send a heartbeat every --heartbeat seconds,
and each takes the other for gone after --heartbeat-timeout seconds of silence. A listening
coordinator requires a token (--token or SHARDOPT_ELASTIC_TOKEN), which agents must present:
launch messages carry the job's rendezvous token.
"""
import hmac
import json
import os
import queue
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time


def say(text):
    print(f"shardopt-run: {text}", file=sys.stderr, flush=True)


def free_port(addr):
    """A port on addr that binds now, for a rendezvous rank 0 binds a moment later. Taken below the
    kernel's ephemeral range: a port the kernel chose (bind to 0) is also where it puts the source
    ports of outgoing connections, which other jobs on the host open in that moment."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    rng = secrets.SystemRandom()
    for _ in range(64 if ephemeral_low > 10000 + 1024 else 0):  # bounded; else the kernel's choice
        port = rng.randrange(10000, ephemeral_low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((addr, port))
                return port
            except OSError:
                continue
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def host_port(text, what):
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SystemExit(f"shardopt-run: {what} must be ADDR:PORT, not '{text}'")
    return host, int(port)


class Channel:
    """A control connection: JSON messages, one per line, over a non-blocking socket."""

    MAX_LINE = 1 << 20

    def __init__(self, sock):
        self.sock = sock
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.inbox = b""
        self.outbox = b""
        self.heard = time.monotonic()
        self.closed = False

    def send(self, **msg):
        if self.closed:
            return
        self.outbox += json.dumps(msg).encode() + b"\n"
        self.flush()

    def flush(self):
        while self.outbox and not self.closed:
            try:
                n = self.sock.send(self.outbox)
            except BlockingIOError:
                return
            except OSError:
                self.close()
                return
            self.outbox = self.outbox[n:]

    def receive(self):
        """Messages that arrived (reads what is there; never blocks). Closed: sets .closed."""
        msgs = []
        while not self.closed:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                break
            except OSError:
                self.close()
                break
            if not data:
                self.close()
                break
            self.inbox += data
            if len(self.inbox) > self.MAX_LINE and b"\n" not in self.inbox:
                self.close()
                break
        while b"\n" in self.inbox:
            line, self.inbox = self.inbox.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                self.close()
                break
            if isinstance(msg, dict) and isinstance(msg.get("op"), str):
                self.heard = time.monotonic()
                msgs.append(msg)
        return msgs

    def close(self):
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass


class LocalRanks:
    """The rank processes of one generation on this host. Each exit is reported once, with the
    time its reaper saw it, on `events` as (generation, rank, exit code, time); ranks this object
    killed are marked so."""

    def __init__(self, command, events, out_lock):
        self.command = command
        self.events = events
        self.lock = out_lock
        self.procs = {}  # rank -> Popen
        self.generation = None
        self.killed = False

    def start(self, generation, ranks, env_common):
        """ranks: [(rank, local_rank)]. Returns an error message, or None."""
        self.generation, self.killed, self.procs = generation, False, {}
        for rank, local_rank in ranks:
            env = dict(os.environ)
            env.update(env_common)
            env.update({"SHARDOPT_RANK": str(rank), "SHARDOPT_LOCAL_RANK": str(local_rank),
                        "SHARDOPT_LOCAL_WORLD_SIZE": str(len(ranks))})
            env.setdefault("SHARDOPT_BACKEND", "ucx")
            try:
                p = subprocess.Popen(self.command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
            except OSError as e:
                self.kill()
                return f"cannot start {self.command[0]}: {e}"
            self.procs[rank] = p
            threading.Thread(target=self._pump, args=(generation, rank, p), daemon=True).start()
            threading.Thread(target=self._reap, args=(generation, rank, p), daemon=True).start()
        return None

    def _pump(self, generation, rank, p):
        prefix = f"[g{generation}:{rank}] ".encode()
        out = sys.stdout.buffer
        for line in iter(p.stdout.readline, b""):
            if not line.endswith(b"\n"):
                line += b"\n"
            with self.lock:
                out.write(prefix + line)
                out.flush()
        p.stdout.close()

    def _reap(self, generation, rank, p):
        code = p.wait()  # the time is taken at once, not after the output is drained
        self.events.put((generation, rank, code, time.monotonic()))

    def running(self):
        return any(p.poll() is None for p in self.procs.values())

    def kill(self):
        self.killed = True
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def wait(self, timeout):
        deadline = time.monotonic() + timeout
        for p in self.procs.values():
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                return False
        return True


def describe(code):
    return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"


def exit_status(code):
    return 128 - code if code < 0 else code


class Host:
    def __init__(self, ident, slots, channel=None, addr=None, name="", listen_addr=None):
        self.ident, self.slots, self.channel, self.addr, self.name = ident, slots, channel, addr, name
        self.listen_addr = listen_addr  # the coordinator's address as this agent reached it
        self.retired = set()  # slot indices that failed
        self.gone = False
        self.stopped_gen = None
        self.port_reply = None

    def label(self):
        return "this host" if self.channel is None else f"host {self.ident} at {self.addr} ({self.name})"


class Coordinator:
    def __init__(self, args, command):
        self.args, self.command = args, command
        self.out_lock = threading.Lock()
        self.events = queue.Queue()
        self.local = LocalRanks(command, self.events, self.out_lock)
        self.hosts = [Host(0, args.nprocs)]
        self.sel = selectors.DefaultSelector()
        self.listener = None
        self.pending = []  # accepted connections that have not said hello yet: (Channel, since)
        self.last_beat = 0.0
        self.deadline = time.monotonic() + args.timeout if args.timeout > 0 else None
        self.token = args.token or os.environ.get("SHARDOPT_ELASTIC_TOKEN", "")
        self.gen_hosts = {}  # rank -> (host, slot) of the running generation
        self.stopping = False

    # --- the control plane --------------------------------------------------------------------
    def listen(self):
        if not self.args.listen:
            return
        if not self.token:
            raise SystemExit("shardopt-run: --listen needs --token (or SHARDOPT_ELASTIC_TOKEN): agents get the "
                             "job's rendezvous token over this connection")
        addr, port = host_port(self.args.listen, "--listen")
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.listener.bind((addr, port))
        except OSError as e:
            raise SystemExit(f"shardopt-run: cannot listen on {addr}:{port}: {e}")
        self.listener.listen(64)
        self.listener.setblocking(False)
        self.sel.register(self.listener, selectors.EVENT_READ)
        say(f"elastic coordinator listening on {addr}:{self.listener.getsockname()[1]}")

    def agents(self):
        return [h for h in self.hosts if h.channel is not None and not h.gone]

    def pump(self, timeout):
        """Waits up to timeout for control traffic; handles joins, heartbeats and messages.
        Returns the agents' messages as (host, msg)."""
        got = []
        for key, _ in self.sel.select(timeout):
            if key.fileobj is self.listener:
                try:
                    conn, _peer = self.listener.accept()
                except OSError:
                    continue
                ch = Channel(conn)
                self.pending.append((ch, time.monotonic()))
        now = time.monotonic()
        for ch, since in list(self.pending):
            for msg in ch.receive():
                if msg["op"] == "hello":
                    self.pending.remove((ch, since))
                    self.welcome(ch, msg)
                    break
            else:
                if ch.closed or now - since > self.args.heartbeat_timeout:
                    ch.close()
                    if (ch, since) in self.pending:
                        self.pending.remove((ch, since))
        for h in self.agents():
            for msg in h.channel.receive():
                if msg["op"] == "stopped":
                    h.stopped_gen = msg.get("gen")
                elif msg["op"] == "port":
                    h.port_reply = msg.get("port")
                elif msg["op"] != "heartbeat":
                    got.append((h, msg))
            if h.channel.closed or now - h.channel.heard > self.args.heartbeat_timeout:
                why = "closed its connection" if h.channel.closed else \
                    f"has not answered for {now - h.channel.heard:.1f} s"
                h.gone = True
                h.channel.close()
                self.unregister(h)
                say(f"{h.label()} {why}: taking it for gone")
        if now - self.last_beat >= self.args.heartbeat:
            self.last_beat = now
            for h in self.agents():
                h.channel.send(op="heartbeat")
        for h in self.agents():
            h.channel.flush()
        return got

    def unregister(self, h):
        try:
            self.sel.unregister(h.channel.sock)
        except (KeyError, ValueError, OSError):
            pass

    def welcome(self, ch, msg):
        slots = msg.get("slots")
        if not hmac.compare_digest(str(msg.get("token", "")).encode(), self.token.encode()):
            ch.send(op="refused", reason="wrong token")
            ch.close()
            say("refused an agent: wrong token")
            return
        if not isinstance(slots, int) or slots < 1:
            ch.send(op="refused", reason=f"bad slot count {slots!r}")
            ch.close()
            return
        h = Host(len(self.hosts), slots, ch, ch.sock.getpeername()[0], str(msg.get("host", "")),
                 ch.sock.getsockname()[0])
        self.hosts.append(h)
        self.sel.register(ch.sock, selectors.EVENT_READ)
        ch.send(op="welcome", id=h.ident)
        waits = " (it waits for the next restart)" if self.gen_hosts else ""
        say(f"{h.label()} joined with {slots} slot(s){waits}")

    # --- generations ---------------------------------------------------------------------------
    def slots(self):
        """Usable slots, in rank order: this host's first, then the agents' in joining order."""
        out = []
        for h in self.hosts:
            if not h.gone:
                out += [(h, i) for i in range(h.slots) if i not in h.retired]
        return out

    def gather(self):
        wanted = self.args.hosts
        deadline = time.monotonic() + self.args.join_timeout
        while 1 + len(self.agents()) < wanted and time.monotonic() < deadline:
            self.pump(0.05)
        if 1 + len(self.agents()) < wanted:
            say(f"{1 + len(self.agents())} of {wanted} hosts joined within {self.args.join_timeout:g} s; "
                "starting with those")

    def port_for(self, h):
        """A free rendezvous port on host h (asked of its agent)."""
        if h.channel is None:
            return free_port(self.master_addr(h))
        h.port_reply = None
        h.channel.send(op="port")
        deadline = time.monotonic() + self.args.heartbeat_timeout
        while h.port_reply is None and not h.gone and time.monotonic() < deadline:
            self.pump(0.02)
        return h.port_reply if isinstance(h.port_reply, int) else None

    def master_addr(self, h):
        if h.channel is not None:
            return h.addr
        if self.args.master_addr:
            return self.args.master_addr
        agent = next(iter(self.agents()), None)
        return agent.listen_addr if agent else "127.0.0.1"

    def launch(self, gen, members):
        """Starts generation gen on members [(host, slot)]. Returns an error message or None."""
        first = members[0][0]
        port = self.port_for(first)
        if port is None:
            return f"{first.label()} gave no rendezvous port"
        env = {"SHARDOPT_WORLD_SIZE": str(len(members)), "SHARDOPT_MASTER_ADDR": self.master_addr(first),
               "SHARDOPT_MASTER_PORT": str(port), "SHARDOPT_JOB_TOKEN": secrets.token_hex(16),
               "SHARDOPT_ELASTIC_GENERATION": str(gen), "SHARDOPT_ELASTIC_MIN": str(self.args.min),
               "SHARDOPT_ELASTIC_MAX": str(self.args.max)}
        if self.args.checkpoint_dir:
            env["SHARDOPT_CHECKPOINT_DIR"] = os.path.abspath(self.args.checkpoint_dir)
        self.gen_hosts = {rank: m for rank, m in enumerate(members)}
        by_host = {}
        for rank, (h, _slot) in enumerate(members):
            by_host.setdefault(h.ident, (h, []))[1].append(rank)
        layout = ", ".join(f"{h.label()}: {ranks}" for h, ranks in by_host.values())
        say(f"generation {gen}: {len(members)} ranks ({layout})")
        for h, ranks in by_host.values():
            if h.channel is None:
                err = self.local.start(gen, [(r, i) for i, r in enumerate(ranks)], env)
                if err:
                    return err
            else:
                h.stopped_gen = None
                h.channel.send(op="launch", gen=gen, ranks=ranks, env=env)
        return None

    def watch(self, gen):
        """Until generation gen ends: ("done", None) or ("failed", (rank, code, why))."""
        done = set()
        world = len(self.gen_hosts)
        while True:
            if self.deadline is not None and time.monotonic() > self.deadline:
                return "timeout", None
            msgs = self.pump(0.02)
            failures = []
            while True:
                try:
                    g, rank, code, t = self.events.get_nowait()
                except queue.Empty:
                    break
                if g != gen or self.local.killed:
                    continue
                if code == 0:
                    done.add(rank)
                else:
                    failures.append((t, rank, code))
            for h, msg in msgs:
                if msg["op"] == "exit" and msg.get("gen") == gen:
                    rank, code = msg.get("rank"), msg.get("code")
                    if code == 0:
                        done.add(rank)
                    elif isinstance(code, int):
                        failures.append((time.monotonic(), rank, code))
                elif msg["op"] == "failed" and msg.get("gen") == gen:
                    return "failed", (None, 127, f"{h.label()} could not start its ranks: {msg.get('reason')}")
            if failures:
                failures += self.settle(gen, done, failures)
                rank, code = self.culprit(failures)
                h, _slot = self.gen_hosts[rank]
                return "failed", (rank, code, f"rank {rank} on {h.label()} {describe(code)}")
            lost = [h for h, _ in self.gen_hosts.values() if h.gone]
            if lost:
                return "failed", (None, 1, f"{lost[0].label()} is gone")
            if len(done) == world:
                return "done", None

    def settle(self, gen, done, failures):
        """After a first failure: the other failures that follow within --settle seconds (the
        survivors' peer_lost), or until every rank of the generation has ended."""
        more = []
        ended = set(done) | {f[1] for f in failures}
        deadline = time.monotonic() + self.args.settle
        while len(ended) < len(self.gen_hosts) and time.monotonic() < deadline:
            for h, msg in self.pump(0.01):
                if msg["op"] == "exit" and msg.get("gen") == gen and isinstance(msg.get("code"), int):
                    ended.add(msg.get("rank"))
                    if msg["code"] != 0:
                        more.append((time.monotonic(), msg.get("rank"), msg["code"]))
            while True:
                try:
                    g, rank, code, t = self.events.get_nowait()
                except queue.Empty:
                    break
                if g == gen:
                    ended.add(rank)
                    if code != 0:
                        more.append((t, rank, code))
        return more

    @staticmethod
    def culprit(failures):
        """The rank that failed first. A rank killed by a signal (SIGKILL, SIGSEGV, ...; not
        SIGABRT, which an unhandled error raises) died from outside or crashed: the others then
        failed because of it, however the launcher happened to see the order."""
        killed = [f for f in failures if f[2] < 0 and -f[2] != signal.SIGABRT]
        t, rank, code = min(killed or failures)
        return rank, code

    def stop(self, gen):
        """Stops every rank of generation gen. Agents that do not confirm in time are gone."""
        self.local.kill()
        involved = {h.ident: h for h, _ in self.gen_hosts.values() if h.channel is not None and not h.gone}
        for h in involved.values():
            h.channel.send(op="stop", gen=gen)
        deadline = time.monotonic() + self.args.stop_timeout
        while time.monotonic() < deadline:
            waiting = [h for h in involved.values() if not h.gone and h.stopped_gen != gen]
            if not waiting:
                break
            self.pump(0.02)
        for h in involved.values():
            if not h.gone and h.stopped_gen != gen:
                h.gone = True
                h.channel.close()
                self.unregister(h)
                say(f"{h.label()} did not confirm that its ranks stopped within {self.args.stop_timeout:g} s: "
                    "taking it for gone")
        if not self.local.wait(self.args.stop_timeout):
            say("local ranks did not end after SIGKILL")
        while not self.events.empty():  # the killed ranks' exits
            self.events.get_nowait()

    def retire(self, failure):
        """What failed goes: every slot of a host that is gone, else the first failed rank's slot."""
        lost = {h.ident: h for h, _ in self.gen_hosts.values() if h.gone}
        if lost:
            for h in lost.values():
                say(f"{h.label()} and its {h.slots} slot(s) are out of the job")
            return
        rank = failure[0]
        if rank is not None:
            h, slot = self.gen_hosts[rank]
            h.retired.add(slot)
            say(f"slot {slot} of {h.label()} (rank {rank}) is out of the job")

    def finish(self, code):
        for h in self.agents():
            h.channel.send(op="done", code=code)
        end = time.monotonic() + 1.0
        while time.monotonic() < end and any(h.channel.outbox for h in self.agents()):
            for h in self.agents():
                h.channel.flush()
            time.sleep(0.01)
        return code

    def run(self):
        self.listen()
        self.gather()
        gen, first_code = 0, None
        while True:
            members = self.slots()[:self.args.max]
            if len(members) < self.args.min:
                say(f"{len(members)} slot(s) left, fewer than --min {self.args.min}: giving up")
                return self.finish(first_code or 1)
            err = self.launch(gen, members)
            outcome, failure = ("failed", (None, 127, err)) if err else self.watch(gen)
            if outcome == "done":
                say(f"generation {gen} finished on {len(members)} ranks")
                return self.finish(0)
            if outcome == "timeout":
                say(f"job timed out after {self.args.timeout:g} s; stopping every rank")
                self.stop(gen)
                return self.finish(124)
            rank, code, why = failure
            say(f"generation {gen} failed: {why}; stopping its ranks")
            first_code = first_code or exit_status(code)
            t0 = time.monotonic()
            self.stop(gen)
            self.retire(failure)
            self.gen_hosts = {}
            if gen >= self.args.max_restarts:
                say(f"giving up after {gen} restart(s) (--max-restarts {self.args.max_restarts})")
                return self.finish(first_code)
            say(f"ranks stopped in {time.monotonic() - t0:.2f} s; restarting from the last checkpoint")
            gen += 1


class Agent:
    def __init__(self, args, command):
        self.args, self.command = args, command
        self.out_lock = threading.Lock()
        self.events = queue.Queue()
        self.local = LocalRanks(command, self.events, self.out_lock)
        self.token = args.token or os.environ.get("SHARDOPT_ELASTIC_TOKEN", "")

    def connect(self):
        addr, port = host_port(self.args.join, "--join")
        deadline = time.monotonic() + self.args.join_timeout
        while True:
            try:
                sock = socket.create_connection((addr, port), timeout=max(0.1, min(2.0, deadline - time.monotonic())))
                return Channel(sock)
            except OSError as e:
                if time.monotonic() >= deadline:
                    raise SystemExit(f"shardopt-run: cannot reach the coordinator at {addr}:{port} within "
                                     f"{self.args.join_timeout:g} s: {e}")
                time.sleep(0.2)

    def run(self):
        ch = self.connect()
        ch.send(op="hello", token=self.token, slots=self.args.nprocs, host=socket.gethostname())
        sel = selectors.DefaultSelector()
        sel.register(ch.sock, selectors.EVENT_READ)
        last_beat = 0.0
        while True:
            sel.select(0.02)
            for msg in ch.receive():
                op = msg["op"]
                if op == "refused":
                    say(f"the coordinator refused this host: {msg.get('reason')}")
                    return 1
                if op == "welcome":
                    say(f"joined the job as host {msg.get('id')}")
                elif op == "launch":
                    ranks = msg.get("ranks") or []
                    if self.local.running():
                        self.local.kill()
                        self.local.wait(self.args.heartbeat_timeout)
                    err = self.local.start(msg["gen"], [(r, i) for i, r in enumerate(ranks)], msg.get("env", {}))
                    if err:
                        say(err)
                        ch.send(op="failed", gen=msg["gen"], reason=err)
                elif op == "stop":
                    self.local.kill()
                    self.local.wait(self.args.heartbeat_timeout)
                    ch.send(op="stopped", gen=msg.get("gen"))
                elif op == "port":
                    ch.send(op="port", port=free_port(ch.sock.getsockname()[0]))
                elif op == "done":
                    self.local.kill()
                    self.local.wait(self.args.heartbeat_timeout)
                    code = msg.get("code", 1)
                    return code if isinstance(code, int) else 1
            while True:
                try:
                    g, rank, code, _t = self.events.get_nowait()
                except queue.Empty:
                    break
                if g == self.local.generation and not self.local.killed:
                    ch.send(op="exit", gen=g, rank=rank, code=code)
            now = time.monotonic()
            if ch.closed or now - ch.heard > self.args.heartbeat_timeout:
                why = "closed the connection" if ch.closed else f"has not answered for {now - ch.heard:.1f} s"
                say(f"the coordinator {why}: stopping this host's ranks")
                self.local.kill()
                self.local.wait(self.args.heartbeat_timeout)
                return 1
            if now - last_beat >= self.args.heartbeat:
                last_beat = now
                ch.send(op="heartbeat")
            ch.flush()


def add_arguments(ap):
    g = ap.add_argument_group("elastic (--elastic)")
    g.add_argument("--elastic", action="store_true", help="restart the job at a new world size when ranks are lost")
    g.add_argument("--min", type=int, default=1, help="fewest ranks the job may run with (default 1)")
    g.add_argument("--max", type=int, default=0, help="most ranks (default: every slot)")
    g.add_argument("--hosts", type=int, default=1, help="hosts to wait for before the first start, this one included")
    g.add_argument("--listen", default="", help="ADDR:PORT where agents join (coordinator)")
    g.add_argument("--join", default="", help="ADDR:PORT of the coordinator (agent)")
    g.add_argument("--token", default="", help="shared secret of coordinator and agents (or SHARDOPT_ELASTIC_TOKEN)")
    g.add_argument("--checkpoint-dir", default="", help="sets SHARDOPT_CHECKPOINT_DIR for the ranks")
    g.add_argument("--max-restarts", type=int, default=3, help="restarts before giving up (default 3)")
    g.add_argument("--join-timeout", type=float, default=60.0, help="seconds to wait for hosts / the coordinator")
    g.add_argument("--heartbeat", type=float, default=1.0, help="seconds between heartbeats (default 1)")
    g.add_argument("--heartbeat-timeout", type=float, default=10.0,
                   help="silence after which a host (or the coordinator) is gone (default 10)")
    g.add_argument("--settle", type=float, default=0.5,
                   help="seconds to collect the failures that follow a first one, to tell the rank that died "
                        "from the ones that lost it (default 0.5)")
    g.add_argument("--stop-timeout", type=float, default=0.0,
                   help="seconds agents have to confirm their ranks stopped (default: the heartbeat timeout)")


def main(args, command):
    if args.nprocs < 0 or (args.nprocs < 1 and args.join):
        raise SystemExit("shardopt-run: -n must be at least 1")
    if args.heartbeat <= 0 or args.heartbeat_timeout <= args.heartbeat:
        raise SystemExit("shardopt-run: --heartbeat-timeout must exceed --heartbeat (> 0)")
    if args.stop_timeout <= 0:
        args.stop_timeout = args.heartbeat_timeout
    if args.join:
        agent = Agent(args, command)

        def on_agent_signal(signum, _frame):
            agent.local.kill()  # its ranks run in sessions of their own: they would outlive it
            sys.exit(128 + signum)

        signal.signal(signal.SIGINT, on_agent_signal)
        signal.signal(signal.SIGTERM, on_agent_signal)
        return agent.run()
    if args.min < 1:
        raise SystemExit("shardopt-run: --min must be at least 1")
    if args.max == 0:
        args.max = 1 << 30
    if args.max < args.min:
        raise SystemExit(f"shardopt-run: --max {args.max} is below --min {args.min}")
    if args.hosts < 1 or (args.hosts > 1 and not args.listen):
        raise SystemExit("shardopt-run: --hosts above 1 needs --listen ADDR:PORT for the agents")
    coordinator = Coordinator(args, command)

    def on_signal(signum, _frame):
        coordinator.local.kill()
        sys.exit(coordinator.finish(128 + signum))

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    return coordinator.run()
