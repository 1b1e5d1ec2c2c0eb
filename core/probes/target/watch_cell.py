# tfdoctor watch: run this cell first in your notebook (before training). It needs nothing but
# TensorFlow: it writes TensorFlow's own numbers, as JSON lines, to the file tfdoctor reads.
# - every second: TensorFlow's GPU memory in use and its peak, per device;
# - every training step (Keras fit, added to each fit by itself): its time, how often the
#   train function was traced;
# - an out-of-memory error: its message (with the op that failed), before the traceback.
import json as _tfd_json
import os as _tfd_os
import threading as _tfd_threading
import time as _tfd_time

TFDOCTOR_WATCH_FILE = _tfd_os.environ.get("TFDOCTOR_WATCH_FILE") or "__TFDOCTOR_WATCH_FILE__"


def _tfdoctor_watch():
    import tensorflow as tf

    lock = _tfd_threading.Lock()
    out = open(TFDOCTOR_WATCH_FILE, "a", buffering=1, encoding="utf-8")  # noqa: SIM115

    def put(kind, **item):
        item.update(k=kind, wall=round(_tfd_time.time(), 3), pid=_tfd_os.getpid())
        line = _tfd_json.dumps(item, separators=(",", ":"))
        with lock:
            out.write(line + "\n")

    def memory():
        found = {}
        for dev in tf.config.list_logical_devices("GPU"):
            try:
                info = tf.config.experimental.get_memory_info(dev.name)
            except Exception:  # a device without an allocator that counts
                continue
            found[dev.name.replace("/device:", "")] = {
                "current": int(info["current"]),
                "peak": int(info["peak"]),
            }
        return found

    def every_second():
        while True:
            mem = memory()
            if mem:
                put("tf", device=mem)
            _tfd_time.sleep(1.0)

    _tfd_threading.Thread(target=every_second, name="tfdoctor-watch", daemon=True).start()

    class TfdoctorWatch(tf.keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.step, self.began, self.last_put = 0, 0.0, 0.0

        def on_train_batch_begin(self, batch, logs=None):
            self.began = _tfd_time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.step += 1
            now = _tfd_time.perf_counter()
            step_s = now - self.began
            # at most 10 a second, but a slow step (a retrace, a stall) always
            if now - self.last_put < 0.1 and self.step > 2 and step_s < 0.5:
                return
            self.last_put = now
            traced = None
            fn = getattr(self.model, "train_function", None)
            count = getattr(fn, "experimental_get_tracing_count", None)
            if callable(count):
                try:
                    traced = int(count())
                except Exception:
                    traced = None
            put("step", step=self.step, step_s=round(step_s, 6), traced=traced)

        def on_epoch_end(self, epoch, logs=None):
            put("marker", label=f"epoch {epoch + 1} done", category="phase")

    model_class = tf.keras.Model
    original_fit = model_class.fit
    if not getattr(original_fit, "_tfdoctor", False):

        def fit(self, *args, **kwargs):
            callbacks = list(kwargs.get("callbacks") or [])
            if not any(isinstance(c, TfdoctorWatch) for c in callbacks):
                callbacks.append(TfdoctorWatch())
            kwargs["callbacks"] = callbacks
            put("marker", label="fit started", category="phase")
            return original_fit(self, *args, **kwargs)

        fit._tfdoctor = True
        model_class.fit = fit

    def on_oom(shell, etype, value, tb, tb_offset=None):
        put("marker", label=f"OOM: {str(value).strip()[:400]}", category="oom")
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)

    try:
        shell = get_ipython()  # type: ignore[name-defined]  # defined in a notebook
    except NameError:
        shell = None
    if shell is not None:
        shell.set_custom_exc((tf.errors.ResourceExhaustedError,), on_oom)
    put("marker", label=f"watching: TensorFlow {tf.__version__}", category="note")


if __name__ == "__main__":  # a notebook's cell runs in __main__ (importing it does nothing)
    _tfdoctor_watch()
