#!/usr/bin/env python3
"""A training loop that keeps its work when shareq takes its GPUs back (SPEC §14).

Run it as a shareq job of a share that borrows (see sample-configs/checkpoints and
docs/CHECKPOINTS.md):

    shareq submit --share background --gpus 1 -- \
        python3 docs/examples/train_with_checkpoints.py

What it does:

* trains step by step (here a toy model, y = w*x + b fitted by SGD in pure Python, so
  that it runs anywhere; the comments marked "torch:" show where a real job saves);
* saves its state every TRAIN_SAVE_EVERY steps, and at once when it gets the notice
  signal (SHAREQ_NOTICE_SIGNAL, e.g. SIGUSR1) or SIGTERM; after each save it runs
  `shareq checkpoint --note step<N>`, so that the scheduler knows how much work a
  reclaim would lose (it picks the victim that saved last, and counts what is lost from
  the last save);
* after the save that a signal asked for it exits 0: the GPUs go back sooner, nothing
  since the save is lost, and shareq requeues it (an exit during a preemption stop is
  the preemption, whatever its status);
* on its next attempt it resumes from the checkpoint the note names
  (SHAREQ_LAST_CHECKPOINT_NOTE, given to a requeued attempt), or else from the newest
  checkpoint file in its directory.

Settings (environment): TRAIN_DIR (where checkpoints go; default ./checkpoints),
TRAIN_STEPS (default 1000), TRAIN_STEP_SECONDS (time one step takes; default 1),
TRAIN_SAVE_EVERY (steps between saves; default 100), SHAREQ_BIN (the shareq command;
default `shareq` on PATH). Outside shareq (no SHAREQ_JOB_ID) it trains and saves the same
but reports nothing.
"""

import glob
import json
import os
import random
import signal
import subprocess
import sys
import time

CHECKPOINT_DIR = os.environ.get("TRAIN_DIR", os.path.join(os.getcwd(), "checkpoints"))
STEPS = int(os.environ.get("TRAIN_STEPS", "1000"))
STEP_SECONDS = float(os.environ.get("TRAIN_STEP_SECONDS", "1"))
SAVE_EVERY = int(os.environ.get("TRAIN_SAVE_EVERY", "100"))
SHAREQ = os.environ.get("SHAREQ_BIN", "shareq")

# Set by the signal handlers, read between steps (a handler only notes the request: the
# save happens in the main loop, never halfway through a step).
stop_asked = None


def log(msg):
    print(f"[train] {msg}", flush=True)


def on_signal(signum, _frame):
    global stop_asked
    if stop_asked is None:
        stop_asked = signal.Signals(signum).name


def trap_signals():
    """SIGTERM always; the share's notice signal where it has one (the scheduler puts its
    name in SHAREQ_NOTICE_SIGNAL, and the seconds until SIGTERM in SHAREQ_NOTICE_SECONDS)."""
    signal.signal(signal.SIGTERM, on_signal)
    notice = os.environ.get("SHAREQ_NOTICE_SIGNAL")
    if notice:
        sig = getattr(signal, notice, None)
        if sig is None:
            log(f"unknown notice signal {notice!r}: only SIGTERM is trapped")
        else:
            signal.signal(sig, on_signal)
            log(
                f"notice: {notice} {os.environ.get('SHAREQ_NOTICE_SECONDS', '?')} s "
                f"before SIGTERM, then {os.environ.get('SHAREQ_GRACE_SECONDS', '?')} s "
                "before SIGKILL"
            )


def checkpoint_path(step):
    return os.path.join(CHECKPOINT_DIR, f"step{step}.json")


def save(state):
    """Write the state atomically (a file half written by a SIGKILL is never read)."""
    os.makedirs(CHECKPOINT_DIR, exist_ok=True)
    path = checkpoint_path(state["step"])
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    # torch: torch.save({"step": step, "model": model.state_dict(),
    #                    "optimizer": optimizer.state_dict()}, tmp); os.replace(tmp, path)
    # Keep the two newest checkpoints.
    for old in sorted(glob.glob(os.path.join(CHECKPOINT_DIR, "step*.json")), key=step_of)[:-2]:
        os.remove(old)
    return path


def report(step):
    """Tell the scheduler the work up to `step` is saved (`shareq checkpoint`). It finds
    the job and the attempt from SHAREQ_JOB_ID and SHAREQ_ATTEMPT_TOKEN in the
    environment. A report that fails costs nothing but the scheduler's knowledge: the
    file is saved either way."""
    if not os.environ.get("SHAREQ_JOB_ID"):
        return
    try:
        r = subprocess.run(
            [SHAREQ, "checkpoint", "--note", f"step{step}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        log(f"shareq checkpoint: {e}")
        return
    if r.returncode != 0:
        log(f"shareq checkpoint exited {r.returncode}: {r.stderr.strip()}")


def step_of(path):
    name = os.path.basename(path)
    try:
        return int(name[len("step"):-len(".json")])
    except ValueError:
        return -1


def resume():
    """The state to start from: the checkpoint the scheduler's note names (a requeued
    attempt gets SHAREQ_LAST_CHECKPOINT_NOTE, e.g. `step700`, and SHAREQ_LAST_CHECKPOINT,
    when it was reported), else the newest file, else a fresh start."""
    note = os.environ.get("SHAREQ_LAST_CHECKPOINT_NOTE", "")
    candidates = []
    if note.startswith("step") and note[4:].isdigit():
        candidates.append(checkpoint_path(int(note[4:])))
    candidates += sorted(
        glob.glob(os.path.join(CHECKPOINT_DIR, "step*.json")), key=step_of, reverse=True
    )
    for path in candidates:
        try:
            with open(path) as f:
                state = json.load(f)
        except (OSError, ValueError):
            continue
        log(
            f"resumed from step {state['step']} ({path}; last report "
            f"{os.environ.get('SHAREQ_LAST_CHECKPOINT', 'none')})"
        )
        # torch: ckpt = torch.load(path); model.load_state_dict(ckpt["model"]);
        #        optimizer.load_state_dict(ckpt["optimizer"])
        return state
    return {"step": 0, "w": 0.0, "b": 0.0, "loss": None}


def train_step(state, rng):
    """One SGD step on a batch of y = 3x + 1 with noise (torch: forward, backward,
    optimizer.step() on the GPU that CUDA_VISIBLE_DEVICES names)."""
    w, b = state["w"], state["b"]
    gw = gb = loss = 0.0
    batch = 32
    for _ in range(batch):
        x = rng.uniform(-1, 1)
        y = 3 * x + 1 + rng.gauss(0, 0.1)
        err = w * x + b - y
        loss += err * err / batch
        gw += 2 * err * x / batch
        gb += 2 * err / batch
    state["w"], state["b"], state["loss"] = w - 0.1 * gw, b - 0.1 * gb, loss
    state["step"] += 1
    time.sleep(STEP_SECONDS)


def main():
    trap_signals()
    state = resume()
    rng = random.Random(state["step"])
    log(
        f"job {os.environ.get('SHAREQ_JOB_ID', '-')} attempt "
        f"{os.environ.get('SHAREQ_ATTEMPT', '-')}: steps {state['step']}..{STEPS}"
    )
    while state["step"] < STEPS:
        train_step(state, rng)
        log(f"step {state['step']} loss {state['loss']:.4f}")
        if stop_asked is not None:
            path = save(state)
            report(state["step"])
            log(f"{stop_asked}: saved step {state['step']} to {path}; exiting to be requeued")
            return 0
        if state["step"] % SAVE_EVERY == 0:
            save(state)
            report(state["step"])
    save(state)
    report(state["step"])
    log(f"done: w={state['w']:.3f} b={state['b']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
