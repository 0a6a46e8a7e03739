"""Pod lab: run a rendered bundle's pods as real Slurm daemons on this machine.

Low-level substrate:
- ``errors``: ``LabError``, the one exception the lab raises (the CLI maps it to exit 2).
- ``rootfs``: the images the containers run on, exported once per image id.
- ``kubelet``: the users, capabilities and volume modes a kubelet and containerd give a pod.
- ``sandbox``: one network namespace + UTS/mount namespace per pod on a private bridge,
  fake GPU device nodes, readiness polling, idempotent teardown and a leftovers check.
- ``podinit``: the stdlib-only init that runs inside each pod before exec'ing its command.
"""
