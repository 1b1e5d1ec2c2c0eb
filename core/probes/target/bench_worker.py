"""Training benchmark worker; run BY THE TARGET INTERPRETER (stdlib, numpy and TensorFlow only).

Usage: python -u bench_worker.py --events-fd W --control-fd R
                                 [--faulthandler-file PATH] [--setup JSON]

The supervisor (core/bench/supervisor.py) starts this script in the user's interpreter and
talks to it over two inherited pipes, never over stdout/stderr (TensorFlow, Keras and user code
print there; the supervisor keeps those streams as evidence):

  W  the worker writes versioned JSON lines (one record each, flushed at once): hello, phase,
     info, knob, ready, step, oom, error, run_done, bye;
  R  the supervisor writes JSON-line commands: {"cmd": "run", "id": N, "config": {...}} and
     {"cmd": "exit"}; end of file on R means exit.

A failing run (an OOM, a Python exception, a bad config) is reported and the worker waits for
the next command; a native crash or a hang is left to the supervisor (faulthandler writes the
Python stacks of a crash, and of all threads on SIGUSR1, to --faulthandler-file).

Must keep working on Python 3.8+ with any TensorFlow 2.x, where tfdoctor is not installed.
"""

import argparse
import contextlib
import faulthandler
import gc
import importlib
import inspect
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback

T0 = time.monotonic()
PROTOCOL = 1

PRESETS = ("cnn", "mlp", "resnet50", "transformer")
DEFAULT_SHAPE = {
    "cnn": (100, 100, 3),
    "mlp": (784,),
    "resnet50": (224, 224, 3),
    "transformer": (256,),
}
CLASSES = {"cnn": 10, "mlp": 10, "resnet50": 10, "transformer": 2}
VOCAB = 20000
D_MODEL = 128
DATA_KINDS = ("array", "stream")
FAULTS = (
    "segfault",
    "abort",
    "exception",
    "tf_oom",
    "hang",
    "stderr_flood",
    "grandchild",
    "host_oom",
    "leak",
    "retrace",
)
CONFIG_DEFAULTS = {
    "preset": "cnn",
    "input_shape": None,
    "batch_size": 32,
    "steps": 20,
    "epochs": 1,
    "data": "array",
    "mixed_precision": False,
    "jit_compile": False,
    "run_eagerly": False,
    "grad_accum": 1,
    "fault": None,
}
SETUP_KEYS = ("device", "memory_growth", "memory_limit_mb")

ALWAYS_SENT = 5  # the first steps of a run always get a record
SLOW_FACTOR = 5.0  # a step this many times the fastest one is always reported...
SLOW_MIN_S = 0.05  # ... when it also took this long (not a scheduler hiccup)
MIN_INTERVAL_S = 0.1  # otherwise at most one step record per interval
MESSAGE_MAX = 4000
TRACEBACK_MAX = 20000

_events = None
_events_lock = threading.Lock()
_phase = None
_memory_device = "CPU:0"
_keep = []  # objects that must live as long as the process (faulthandler file, grandchildren)

# imported in the "import" phase, after hello
np = None
tf = None
keras = None


class ConfigError(Exception):
    """A run config or --setup that cannot be honoured (reported with a one-line message)."""


# ---------------------------------------------------------------------------------------------
# records


def emit(type_, **data):
    rec = {"v": PROTOCOL, "t": round(time.monotonic() - T0, 3), "type": type_}
    rec.update(data)
    line = json.dumps(rec, default=str) + "\n"
    with _events_lock:
        try:
            _events.write(line)
            _events.flush()
        except (OSError, ValueError):
            # The supervisor closed its end: nobody is left to report to or to take orders from.
            os._exit(3)


def phase(name, run=None):
    global _phase
    _phase = name
    emit("phase", phase=name, run=run)


def knob(name, applied, why, run=None):
    emit("knob", name=name, applied=bool(applied), why=why, run=run)


def safe_str(obj):
    try:
        return str(obj)
    except Exception:
        return "<unprintable %s>" % type(obj).__name__


def error(run, exc_type, message, tb=""):
    emit(
        "error",
        run=run,
        exc_type=exc_type,
        message=message[:MESSAGE_MAX],
        traceback=tb[-TRACEBACK_MAX:],
        phase=_phase,
    )


def is_oom(exc):
    if tf is not None and isinstance(exc, tf.errors.ResourceExhaustedError):
        return True
    if "ResourceExhausted" in type(exc).__name__:
        return True
    msg = safe_str(exc)
    return "OOM when allocating" in msg or "out of memory" in msg.lower()


def report_exception(exc, run):
    """Emit an oom or an error record for an exception that escaped a run; return the status."""
    if is_oom(exc):
        emit(
            "oom",
            run=run,
            exc_type=type(exc).__name__,
            message=safe_str(exc)[:MESSAGE_MAX],
            phase=_phase,
        )
        return "oom"
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    error(run, type(exc).__name__, safe_str(exc), tb)
    return "error"


# ---------------------------------------------------------------------------------------------
# memory


try:
    _PAGE = os.sysconf("SC_PAGE_SIZE")
except (AttributeError, ValueError, OSError):
    _PAGE = 4096


def read_rss():
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def memory_info():
    """{"GPU:0": {"current": bytes, "peak": bytes}} of the allocator, or {} where unavailable."""
    try:
        info = tf.config.experimental.get_memory_info(_memory_device)
        return {_memory_device: {"current": int(info["current"]), "peak": int(info["peak"])}}
    except Exception:
        return {}


def memory_stats_error():
    """Why the allocator reports no statistics on this build and device, or None when it does
    (some CPU allocators answer "Allocator stats not available"; the supervisor turns on
    TensorFlow's BFC CPU allocator for CPU runs so that they do)."""
    try:
        tf.config.experimental.get_memory_info(_memory_device)
        return None
    except Exception as exc:
        return "%s: %s" % (type(exc).__name__, safe_str(exc))


def reset_memory_stats():
    reset = getattr(tf.config.experimental, "reset_memory_stats", None)
    if reset is not None:
        with contextlib.suppress(Exception):
            reset(_memory_device)


# ---------------------------------------------------------------------------------------------
# process setup


def parse_setup(text):
    if text is None:
        return {}
    try:
        setup = json.loads(text)
    except ValueError as exc:
        raise ConfigError("--setup is not valid JSON: %s" % exc) from None
    if setup is None:
        return {}
    if not isinstance(setup, dict):
        raise ConfigError("--setup must be a JSON object, got %s" % type(setup).__name__)
    unknown = sorted(k for k in setup if k not in SETUP_KEYS)
    if unknown:
        raise ConfigError("unknown --setup key(s): %s" % ", ".join(unknown))
    if setup.get("device") not in (None, "gpu", "cpu"):
        raise ConfigError("--setup device must be 'gpu' or 'cpu', got %r" % (setup["device"],))
    if setup.get("memory_growth") not in (None, True, False):
        raise ConfigError("--setup memory_growth must be a boolean")
    limit = setup.get("memory_limit_mb")
    if limit is not None and (not is_int(limit) or limit < 1):
        raise ConfigError("--setup memory_limit_mb must be a positive integer or null")
    return setup


def import_tf():
    global np, tf, keras
    phase("import")
    # TensorFlow first: where it is missing, that is the error to report, not numpy's
    tensorflow = importlib.import_module("tensorflow")
    import numpy

    np = numpy
    tf = tensorflow
    keras = tf.keras  # the Keras this TensorFlow gives its users (honours TF_USE_LEGACY_KERAS)
    keras.__version__  # noqa: B018 - resolve the lazy module inside the import phase


def device_init(setup):
    global _memory_device
    phase("device_init")
    cfg = tf.config
    physical = cfg.list_physical_devices("GPU")
    visible = list(physical)
    if setup.get("device") == "cpu":
        visible = []
        if physical:  # the supervisor sets CUDA_VISIBLE_DEVICES=-1 too; this also holds without
            cfg.set_visible_devices([], "GPU")

    limit = setup.get("memory_limit_mb")
    if limit is not None:
        if not visible:
            knob("memory_limit_mb", False, "no GPU in use: there is no GPU memory to limit")
        else:
            setter = getattr(cfg, "set_logical_device_configuration", None) or getattr(
                cfg.experimental, "set_virtual_device_configuration", None
            )
            make = getattr(cfg, "LogicalDeviceConfiguration", None) or getattr(
                cfg.experimental, "VirtualDeviceConfiguration", None
            )
            try:
                setter(visible[0], [make(memory_limit=int(limit))])
                knob("memory_limit_mb", True, "GPU:0 is a logical device of %d MB" % limit)
            except Exception as exc:
                knob("memory_limit_mb", False, "%s: %s" % (type(exc).__name__, safe_str(exc)))

    if setup.get("memory_growth"):
        if not visible:
            knob("memory_growth", False, "no GPU in use: memory growth applies to GPUs only")
        else:
            # TF_FORCE_GPU_ALLOW_GROWTH=true (which the supervisor sets) works in the allocator
            # itself, also where the Python setting is refused (next to a memory limit)
            env = os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH", "").strip().lower() == "true"
            failures = []
            for gpu in visible:
                try:
                    cfg.experimental.set_memory_growth(gpu, True)
                except Exception as exc:
                    failures.append("%s: %s: %s" % (gpu.name, type(exc).__name__, safe_str(exc)))
            if not failures:
                why = "set_memory_growth(True) on %d GPU(s)" % len(visible)
                if env:
                    why += " and TF_FORCE_GPU_ALLOW_GROWTH=true"
                knob("memory_growth", True, why)
            elif env:
                why = "TF_FORCE_GPU_ALLOW_GROWTH=true (set_memory_growth refused: %s)"
                knob("memory_growth", True, why % "; ".join(failures))
            else:
                knob("memory_growth", False, "; ".join(failures))

    logical = cfg.list_logical_devices()  # initializes the runtime with the settings above
    _memory_device = "GPU:0" if any(d.device_type == "GPU" for d in logical) else "CPU:0"

    build = {"is_cuda_build": False, "cuda_version": None, "cudnn_version": None}
    try:
        bi = dict(tf.sysconfig.get_build_info())
        build["is_cuda_build"] = bool(bi.get("is_cuda_build", False))
        if bi.get("cuda_version"):
            build["cuda_version"] = str(bi["cuda_version"])
        if bi.get("cudnn_version"):
            build["cudnn_version"] = str(bi["cudnn_version"])
    except Exception:
        pass
    gpus = []
    for gpu in physical:
        row = {"name": gpu.name, "device_name": None, "compute_capability": None}
        try:
            details = cfg.experimental.get_device_details(gpu)
            row["device_name"] = details.get("device_name")
            cc = details.get("compute_capability")
            if cc:
                row["compute_capability"] = "%d.%d" % tuple(cc)
        except Exception:
            pass
        gpus.append(row)
    emit(
        "info",
        tf_version=getattr(tf, "__version__", None),
        keras_version=getattr(keras, "__version__", None),
        build=build,
        gpus=gpus,
        memory_device=_memory_device,
        memory_stats_error=memory_stats_error(),
        logical_devices=[d.name for d in logical],
    )


# ---------------------------------------------------------------------------------------------
# run config


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def validate(config):
    """The run config with defaults filled in; raises ConfigError with a one-line message."""
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise ConfigError("config must be a JSON object, got %s" % type(config).__name__)
    unknown = sorted(k for k in config if k not in CONFIG_DEFAULTS)
    if unknown:
        raise ConfigError(
            "unknown config key(s): %s (known: %s)"
            % (", ".join(unknown), ", ".join(sorted(CONFIG_DEFAULTS)))
        )
    cfg = dict(CONFIG_DEFAULTS)
    cfg.update((k, v) for k, v in config.items() if v is not None)  # null: the default
    if cfg["preset"] not in PRESETS:
        raise ConfigError("unknown preset %r (one of %s)" % (cfg["preset"], ", ".join(PRESETS)))
    for key in ("batch_size", "steps", "epochs", "grad_accum"):
        if not is_int(cfg[key]) or cfg[key] < 1:
            raise ConfigError("%s must be an integer >= 1, got %r" % (key, cfg[key]))
    for key in ("mixed_precision", "jit_compile", "run_eagerly"):
        if not isinstance(cfg[key], bool):
            raise ConfigError("%s must be true or false, got %r" % (key, cfg[key]))
    if cfg["data"] not in DATA_KINDS:
        raise ConfigError("data must be 'array' or 'stream', got %r" % (cfg["data"],))
    rank = len(DEFAULT_SHAPE[cfg["preset"]])
    shape = cfg["input_shape"]
    if shape is None:
        cfg["input_shape"] = DEFAULT_SHAPE[cfg["preset"]]
    else:
        if (
            not isinstance(shape, list)
            or len(shape) != rank
            or not all(is_int(d) and d >= 1 for d in shape)
        ):
            raise ConfigError(
                "input_shape for preset %s must be a list of %d positive integers, got %r"
                % (cfg["preset"], rank, shape)
            )
        cfg["input_shape"] = tuple(shape)
    fault = cfg["fault"]
    if fault is not None:
        if not isinstance(fault, dict):
            raise ConfigError("fault must be a JSON object, got %r" % (fault,))
        extra = sorted(k for k in fault if k not in ("kind", "at_step"))
        if extra:
            raise ConfigError("unknown fault key(s): %s" % ", ".join(extra))
        if fault.get("kind") not in FAULTS:
            raise ConfigError(
                "unknown fault kind %r (one of %s)" % (fault.get("kind"), ", ".join(FAULTS))
            )
        at = fault.get("at_step")
        at = 2 if at is None else at
        total = cfg["steps"] * cfg["epochs"]
        if not is_int(at) or not 1 <= at <= total:
            raise ConfigError("fault at_step must be an integer in 1..%d, got %r" % (total, at))
        cfg["fault"] = {"kind": fault["kind"], "at_step": at}
    return cfg


# ---------------------------------------------------------------------------------------------
# models and data


def build_model(cfg):
    layers = keras.layers
    preset = cfg["preset"]
    shape = cfg["input_shape"]
    classes = CLASSES[preset]
    if preset == "resnet50":
        kwargs = {"weights": None, "input_shape": shape, "classes": classes}
        if "classifier_activation" in inspect.signature(keras.applications.ResNet50).parameters:
            kwargs["classifier_activation"] = None  # logits, as the loss expects
        model = keras.applications.ResNet50(**kwargs)
        if cfg["mixed_precision"]:  # the outputs in float32, as the mixed-precision guide says
            out = layers.Activation("linear", dtype="float32")(model.output)
            model = keras.Model(model.input, out)
        return model
    if preset == "cnn":
        inp = keras.Input(shape=shape)
        x = layers.Conv2D(32, 3, activation="relu")(inp)
        x = layers.MaxPooling2D()(x)
        x = layers.Conv2D(64, 3, activation="relu")(x)
        x = layers.MaxPooling2D()(x)
        x = layers.Flatten()(x)
        x = layers.Dense(128, activation="relu")(x)
    elif preset == "mlp":
        inp = keras.Input(shape=shape)
        x = layers.Dense(512, activation="relu")(inp)
        x = layers.Dense(512, activation="relu")(x)
    else:  # transformer
        inp = keras.Input(shape=shape, dtype="int32")
        x = layers.Embedding(VOCAB, D_MODEL)(inp)
        x = position_embedding_layer()(shape[0], D_MODEL)(x)
        for _ in range(2):
            att = layers.MultiHeadAttention(num_heads=4, key_dim=D_MODEL // 4)(x, x)
            x = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([x, att]))
            ffn = layers.Dense(256, activation="relu")(x)
            ffn = layers.Dense(D_MODEL)(ffn)
            x = layers.LayerNormalization(epsilon=1e-6)(layers.Add()([x, ffn]))
        x = layers.GlobalAveragePooling1D()(x)
    out = layers.Dense(classes, dtype="float32")(x)
    return keras.Model(inp, out)


def position_embedding_layer():
    class PositionEmbedding(keras.layers.Layer):
        """A learned position embedding added to the token embeddings."""

        def __init__(self, length, dim, **kwargs):
            super().__init__(**kwargs)
            self.length = length
            self.dim = dim

        def build(self, input_shape):
            self.positions = self.add_weight(
                name="positions",
                shape=(self.length, self.dim),
                initializer="random_normal",
                trainable=True,
            )
            super().build(input_shape)

        def call(self, inputs):
            return inputs + self.positions

    return PositionEmbedding


def array_data(cfg):
    """The whole synthetic data set in RAM: steps * batch_size examples."""
    preset = cfg["preset"]
    n = cfg["steps"] * cfg["batch_size"]
    size = (n, *cfg["input_shape"])
    make_rng = getattr(np.random, "default_rng", None)
    if make_rng is not None:
        rng = make_rng()
        if preset == "transformer":
            x = rng.integers(0, VOCAB, size=size, dtype=np.int32)
        else:
            x = rng.random(size, dtype=np.float32)
        y = rng.integers(0, CLASSES[preset], size=(n,), dtype=np.int32)
    else:  # numpy < 1.17
        if preset == "transformer":
            x = np.random.randint(0, VOCAB, size=size).astype(np.int32)
        else:
            x = np.random.random_sample(size).astype(np.float32)
        y = np.random.randint(0, CLASSES[preset], size=(n,)).astype(np.int32)
    return x, y


def stream_data(cfg):
    """A tf.data pipeline of random examples made by tf.random ops, batched and prefetched."""
    preset = cfg["preset"]
    shape = list(cfg["input_shape"])
    classes = CLASSES[preset]
    autotune = getattr(tf.data, "AUTOTUNE", None) or tf.data.experimental.AUTOTUNE

    def example(_):
        if preset == "transformer":
            x = tf.random.uniform(shape, 0, VOCAB, dtype=tf.int32)
        else:
            x = tf.random.uniform(shape, dtype=tf.float32)
        y = tf.random.uniform([], 0, classes, dtype=tf.int32)
        return x, y

    ds = tf.data.Dataset.from_tensors(0).repeat()
    ds = ds.map(example, num_parallel_calls=autotune)
    return ds.batch(cfg["batch_size"], drop_remainder=True).prefetch(autotune)


# ---------------------------------------------------------------------------------------------
# faults


_retraced = []


def retrace(n):
    """A real tf.function retrace: a new Python value each call makes TF trace the function
    again (new graph, new concrete function kept alive), as code passing Python numbers does."""
    if not _retraced:

        @tf.function
        def scaled(x, factor):
            y = x
            for _ in range(200):  # a graph worth tracing
                y = tf.math.sin(y) * factor + tf.math.cos(y)
            return tf.reduce_sum(y)

        _retraced.append(scaled)
    _retraced[0](tf.ones([64, 64]), n)  # n is a Python int: every value is a new trace


def inject_fault(kind):
    """Make a real failure happen inside the training loop (on_train_batch_end)."""
    if kind == "segfault":
        import ctypes

        ctypes.string_at(0)  # a NULL read: a real SIGSEGV
    elif kind == "abort":
        sys.stdout.flush()
        sys.stderr.write("F bench_worker: injected fault: abort() in the training loop\n")
        sys.stderr.flush()
        os.abort()
    elif kind == "exception":
        raise RuntimeError("injected fault: a Python exception in the training loop")
    elif kind == "tf_oom":
        # 2**48 bytes: more than any device has (and more than x86-64 user address space), so
        # the allocator really fails: a ResourceExhaustedError "OOM when allocating tensor".
        with tf.device("/" + _memory_device):
            tf.zeros([1 << 20, 1 << 20, 64])
    elif kind == "hang":
        threading.Event().wait()
    elif kind == "stderr_flood":
        line = b"W bench_worker: injected fault: stderr flood, a line of 64 bytes..\n"
        chunk = line * (65536 // len(line))  # 64 KiB of whole lines
        sys.stderr.flush()
        for _ in range(800):  # 50 MiB
            view = memoryview(chunk)
            while view:
                view = view[os.write(2, view) :]
    elif kind == "grandchild":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        _keep.append(child)
        print("bench_worker: started grandchild pid %d" % child.pid, flush=True)
    elif kind == "retrace":
        pass  # works in on_train_batch_begin (see retrace)
    elif kind == "leak":
        # every step from the fault step on keeps 2 MiB alive, as code that collects each
        # step's outputs in a Python list does
        _keep.append(np.ones(2 << 17, dtype=np.float64))
    elif kind == "host_oom":
        shards = []
        while True:
            shards.append(np.ones(64 << 17, dtype=np.float64))  # 64 MiB, written (touched)
            print("loaded shard %d" % len(shards), flush=True)


# ---------------------------------------------------------------------------------------------
# runs


class RunStats:
    def __init__(self):
        self.steps = 0
        self.first_step_s = None
        self.first_end = None
        self.last_end = None
        self.rss_peak = None

    def see_rss(self, rss):
        if rss is not None and (self.rss_peak is None or rss > self.rss_peak):
            self.rss_peak = rss


def make_callback(run, cfg, stats):
    total = cfg["steps"] * cfg["epochs"]
    batch_size = cfg["batch_size"]
    fault = cfg["fault"]
    fault_step = fault["at_step"] if fault else -1
    clock = time.perf_counter

    class StepRecorder(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.epoch = 1
            self.begin = 0.0
            self.last_sent = float("-inf")
            self.fastest = None

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch + 1

        def on_train_batch_begin(self, batch, logs=None):
            self.begin = clock()
            n = stats.steps + 1
            if fault is not None and fault["kind"] == "retrace" and n > fault_step and n % 10 == 0:
                retrace(n)  # inside the step's time, as a retrace inside train_step would be

        def on_train_batch_end(self, batch, logs=None):
            now = clock()
            step_s = now - self.begin
            stats.steps += 1
            n = stats.steps
            stats.last_end = now
            if n == 1:
                stats.first_step_s = step_s
                stats.first_end = now
            elif self.fastest is None or step_s < self.fastest:
                self.fastest = step_s
            # an unusually slow step is an event (a retrace, a stall): always reported
            slow = (
                self.fastest is not None
                and n > 1
                and step_s > max(SLOW_FACTOR * self.fastest, SLOW_MIN_S)
            )
            if (
                n <= ALWAYS_SENT
                or n in (total, fault_step)
                or slow
                or now - self.last_sent >= MIN_INTERVAL_S
            ):
                self.last_sent = now
                self.send(n, step_s, logs)
            leaking = fault is not None and fault["kind"] == "leak" and n > fault_step
            if n == fault_step or leaking:
                inject_fault(fault["kind"])
            if n == 1:
                phase("steady", run)

        def send(self, n, step_s, logs):
            loss = None
            if logs and logs.get("loss") is not None:
                with contextlib.suppress(Exception):
                    loss = float(logs["loss"])
            rss = read_rss()
            stats.see_rss(rss)
            emit(
                "step",
                run=run,
                step=n,
                epoch=self.epoch,
                step_s=round(step_s, 6),
                examples_per_s=round(batch_size / step_s, 3) if step_s > 0 else None,
                loss=loss,
                mem=memory_info(),
                rss=rss,
            )

    return StepRecorder()


def set_policy(name):
    mp = getattr(keras, "mixed_precision", None)
    setter = getattr(mp, "set_global_policy", None)
    if setter is None:
        setter = getattr(getattr(mp, "experimental", None), "set_policy", None)
    if setter is None:
        return False
    setter(name)
    return True


def train(run, cfg, stats, timing):
    """Build, compile and fit one run; exceptions propagate to the caller."""
    if cfg["mixed_precision"]:
        if set_policy("mixed_float16"):
            why = "global policy mixed_float16, the output layer in float32"
            if _memory_device.startswith("CPU"):
                why += " (no GPU: float16 on the CPU is slow)"
            knob("mixed_precision", True, why, run)
        else:
            knob("mixed_precision", False, "this Keras has no mixed-precision policy API", run)
    data = array_data(cfg) if cfg["data"] == "array" else stream_data(cfg)
    model = build_model(cfg)

    phase("compile", run)
    opt_kwargs = {}
    if cfg["grad_accum"] > 1:
        params = inspect.signature(keras.optimizers.Adam.__init__).parameters
        if "gradient_accumulation_steps" in params:
            opt_kwargs["gradient_accumulation_steps"] = cfg["grad_accum"]
            knob(
                "grad_accum", True, "Adam(gradient_accumulation_steps=%d)" % cfg["grad_accum"], run
            )
        else:
            knob(
                "grad_accum",
                False,
                "Keras %s has no gradient_accumulation_steps on its optimizers (Keras 3 has)"
                % getattr(keras, "__version__", "?"),
                run,
            )
    compile_kwargs = {
        "optimizer": keras.optimizers.Adam(**opt_kwargs),
        "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        "run_eagerly": cfg["run_eagerly"],
    }
    has_jit = "jit_compile" in inspect.signature(model.compile).parameters
    if has_jit:
        # explicit, also when false: Keras 3's default "auto" turns XLA on where a GPU exists
        compile_kwargs["jit_compile"] = cfg["jit_compile"]
    model.compile(**compile_kwargs)
    if cfg["run_eagerly"]:
        knob("run_eagerly", True, "model.compile(run_eagerly=True)", run)
    if cfg["jit_compile"]:
        if not has_jit:
            knob(
                "jit_compile",
                False,
                "Model.compile of Keras %s has no jit_compile" % getattr(keras, "__version__", "?"),
                run,
            )
        elif getattr(model, "jit_compile", True) is False:
            why = "Keras turned it off: "
            if cfg["run_eagerly"]:
                why += "run_eagerly=True excludes jit_compile"
            else:
                why += "the model does not support XLA"
            knob("jit_compile", False, why, run)
        else:
            knob("jit_compile", True, "model.compile(jit_compile=True)", run)

    phase("first_step", run)
    callbacks = [make_callback(run, cfg, stats)]
    start = time.perf_counter()
    try:
        if cfg["data"] == "array":
            model.fit(
                data[0],
                data[1],
                batch_size=cfg["batch_size"],
                epochs=cfg["epochs"],
                verbose=2,
                callbacks=callbacks,
            )
        else:
            model.fit(
                data,
                epochs=cfg["epochs"],
                steps_per_epoch=cfg["steps"],
                shuffle=False,  # a stream is not shuffled (Keras warns otherwise)
                verbose=2,
                callbacks=callbacks,
            )
    finally:
        timing["duration_s"] = time.perf_counter() - start


def run_once(run, config, stats, timing):
    """One run up to the end of fit; returns its status ("completed", "oom" or "error")."""
    policy_set = False
    try:
        phase("build", run)
        try:
            cfg = validate(config)
        except ConfigError as exc:
            error(run, "ConfigError", safe_str(exc))
            return "error", None
        policy_set = cfg["mixed_precision"]
        train(run, cfg, stats, timing)
        return "completed", cfg
    except Exception as exc:
        return report_exception(exc, run), None
    finally:
        if policy_set:
            with contextlib.suppress(Exception):
                set_policy("float32")


def gradient_registry():
    """TensorFlow's global registry of gradient functions, or None where it is not reachable.

    Every graph-mode trace of a tf.custom_gradient (tf.distribute's all_reduce, which Keras 3
    traces into each train function) registers a "CustomGradient-N" entry there that is never
    removed; through its closure it holds the traced FuncGraph, whose captures hold the run's
    variables: without help, each run would leak its weights and optimizer slots (device memory
    included) into all the runs after it.
    """
    try:
        from tensorflow.python.framework import ops as tf_ops

        registry = tf_ops._gradient_registry._registry
    except Exception:
        return None
    return registry if isinstance(registry, dict) else None


def custom_gradient_keys():
    registry = gradient_registry()
    if registry is None:
        return set()
    return {k for k in registry if str(k).startswith("CustomGradient-")}


def forget_custom_gradients(before):
    """Drop the custom gradients registered since `before` (the run's functions are gone)."""
    registry = gradient_registry()
    if registry is None:
        return
    for key in custom_gradient_keys() - before:
        registry.pop(key, None)


def handle_run(run, config):
    reset_memory_stats()
    gradients_before = custom_gradient_keys()
    stats = RunStats()
    stats.see_rss(read_rss())
    timing = {"duration_s": 0.0}
    status, cfg = run_once(run, config, stats, timing)
    phase("done", run)
    stats.see_rss(read_rss())
    steady = None
    if stats.steps >= 2 and stats.last_end > stats.first_end:
        steady = (stats.steps - 1) / (stats.last_end - stats.first_end)
    batch_size = cfg["batch_size"] if cfg else None
    peak = {dev: m["peak"] for dev, m in memory_info().items()}
    emit(
        "run_done",
        run=run,
        status=status,
        steps=stats.steps,
        duration_s=round(timing["duration_s"], 3),
        first_step_s=None if stats.first_step_s is None else round(stats.first_step_s, 6),
        steady_steps_per_s=None if steady is None else round(steady, 3),
        examples_per_s=None if steady is None or not batch_size else round(steady * batch_size, 3),
        peak=peak,
        rss_peak=stats.rss_peak,
    )
    with contextlib.suppress(Exception):
        keras.backend.clear_session()
    with contextlib.suppress(Exception):
        forget_custom_gradients(gradients_before)
    gc.collect()
    reset_memory_stats()
    emit("ready")


# ---------------------------------------------------------------------------------------------
# main


def serve(control):
    """Read commands until "exit" or end of file."""
    while True:
        line = control.readline()
        if not line:
            return
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError as exc:
            error(None, "ProtocolError", "command is not valid JSON (%s): %r" % (exc, line[:200]))
            continue
        cmd = msg.get("cmd") if isinstance(msg, dict) else None
        if cmd == "exit":
            return
        if cmd == "run":
            run = msg.get("id")
            if not is_int(run):
                error(None, "ProtocolError", "run command without an integer id: %r" % line[:200])
                continue
            handle_run(run, msg.get("config"))
            continue
        error(None, "ProtocolError", "unknown command: %r" % line[:200])


def die_with_parent(parent_pid):
    """Linux: the kernel SIGKILLs this worker when tfdoctor ends, however it ends (Ctrl-C,
    SIGTERM, kill -9, the app closed), so no TensorFlow process is left holding memory."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if parent_pid and os.getppid() != parent_pid:  # tfdoctor died before the line above
        os._exit(3)


def main():
    global _events
    parser = argparse.ArgumentParser(description="tfdoctor training benchmark worker")
    parser.add_argument("--events-fd", type=int, required=True)
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--faulthandler-file")
    parser.add_argument("--setup")
    parser.add_argument("--parent-pid", type=int)
    args = parser.parse_args()
    die_with_parent(args.parent_pid)

    _events = os.fdopen(args.events_fd, "w", encoding="utf-8")
    control = os.fdopen(args.control_fd, "r", encoding="utf-8")
    # A native crash leaves the Python stacks of all threads; SIGUSR1 dumps them (a hang).
    if args.faulthandler_file:
        fh = open(args.faulthandler_file, "a")  # noqa: SIM115 - lives as long as the process
        _keep.append(fh)
    else:
        fh = sys.stderr
    faulthandler.enable(file=fh, all_threads=True)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, file=fh, all_threads=True, chain=False)

    emit("hello", pid=os.getpid(), python=sys.version.split()[0], executable=sys.executable)
    try:
        setup = parse_setup(args.setup)
    except ConfigError as exc:
        error(None, "ConfigError", safe_str(exc))
        return 2
    try:
        import_tf()
        device_init(setup)
    except (Exception, SystemExit) as exc:  # a broken install may call sys.exit while importing
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        error(None, type(exc).__name__, safe_str(exc), tb)
        return 1
    emit("ready")
    serve(control)
    emit("bye")
    return 0


if __name__ == "__main__":
    code = main()
    # Everything is reported: skip TensorFlow's interpreter teardown (atexit handlers and thread
    # joins that can take seconds or hang, and tell us nothing).
    for stream in (sys.stdout, sys.stderr, _events):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
