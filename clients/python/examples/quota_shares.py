#!/usr/bin/env python3
"""Quota management on one machine, as the AWS Batch quota-management example notebook
does it through the SageMaker SDK's ``aws_batch`` module, with shareq's Python client.

The notebook's ``create_quota_management_resources`` creates three quota shares of one GPU
each; here they are config documents that the scheduler validates, writes to its config
directory and reloads (``Client.put_config``: admins only). The three shares are those of
``sample-configs/aws-example/shares.yaml``:

- ``qs1``: LEND_AND_BORROW, in-share preemption ENABLED: background work that may borrow
  every idle GPU;
- ``qs2``: LEND: lends its idle GPU and takes it back by preemption when its job arrives;
- ``qs3``: RESERVE: its GPU is held back, so its work starts at once.

Then it submits a small training job to ``qs1``, waits for it and prints its log.

Run it as an admin of a scheduler whose config directory holds the environment (e.g. the
system one, ``/etc/shareq`` with ``sample-configs/aws-example/environment.yaml``)::

    python3 clients/python/examples/quota_shares.py             # the scheduler the CLI finds
    python3 clients/python/examples/quota_shares.py --state DIR  # another one

(``PYTHONPATH=clients/python/src`` when the client is not installed.)
"""

import argparse
import sys

import shareq

#: The training job: a linear model fitted by gradient descent (standard library only), on
#: the GPU shareq gives it in CUDA_VISIBLE_DEVICES.
TRAIN = r"""
import os, random
random.seed(0)
data = [(x / 10, 3 * x / 10 + 1 + random.gauss(0, 0.05)) for x in range(20)]
w = b = 0.0
print("device", os.environ.get("CUDA_VISIBLE_DEVICES"))
for epoch in range(1, int(os.environ.get("EPOCHS", "5")) + 1):
    for _ in range(200):
        gw = sum(2 * (w * x + b - y) * x for x, y in data) / len(data)
        gb = sum(2 * (w * x + b - y) for x, y in data) / len(data)
        w, b = w - 0.1 * gw, b - 0.1 * gb
    loss = sum((w * x + b - y) ** 2 for x, y in data) / len(data)
    print(f"epoch {epoch} loss {loss:.5f}")
print(f"w={w:.2f} b={b:.2f}")
"""


def create_quota_management_resources(client, dry_run=False):
    """The three quota shares of the AWS example, as one file of the config directory;
    returns the scheduler's verdict."""
    shares = [
        shareq.quota_share("qs1", gpus=1, strategy="LEND_AND_BORROW", in_share_preemption=True),
        shareq.quota_share("qs2", gpus=1, strategy="LEND"),
        shareq.quota_share("qs3", gpus=1, strategy="RESERVE"),
    ]
    return client.put_config("shares.yaml", shares, dry_run=dry_run)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--state", help="the scheduler's state directory (default: as the CLI finds it)")
    p.add_argument("--timeout", type=float, default=300, help="seconds to wait for the job")
    args = p.parse_args(argv)

    client = shareq.Client(state=args.state)
    me = client.hello()
    print(f"scheduler {client.state}: shareq {me['version']}, you are {me['user']}"
          f"{' (admin)' if me['admin'] else ''}")

    try:
        verdict = create_quota_management_resources(client)
    except shareq.NotAllowed as e:
        print(f"cannot create the shares: {e.message}", file=sys.stderr)
        return 3
    except shareq.Rejected as e:
        print(f"the scheduler refused the shares:\n{e.message}", file=sys.stderr)
        return 1
    print(f"wrote {verdict['path']}: {verdict['summary']}")
    for s in client.status()["shares"]:
        if s.get("present", True):
            print(f"  {s['name']}: {s['limit']} {s['unit']} guaranteed")

    job = client.submit(
        share="qs1",
        command=[sys.executable, "-c", TRAIN],
        name="train-small",
        gpus=1,
        env={"EPOCHS": "5"},
        cwd="/",
    )
    print(f"submitted job {job.id} to qs1 ({job.state})")
    done = client.wait(job.id, timeout=args.timeout)
    print(f"job {done.id} {done.state} (started {done.started:%H:%M:%S}, "
          f"finished {done.finished:%H:%M:%S})" if done.started else f"job {done.id} {done.state}")
    print(client.log(job.id), end="")
    return 0 if done.state == "SUCCEEDED" else 1


if __name__ == "__main__":
    sys.exit(main())
