"""Pod lab: run a rendered bundle's pods as real Slurm daemons on this machine.

Low-level substrate:
- ``errors``: ``LabError``, the one exception the lab raises (the CLI maps it to exit 2).
- ``rootfs``: the images the containers run on, exported once per image id.
- ``kubelet``: the users, capabilities and volume modes a kubelet and containerd give a pod.
- ``sandbox``: one network namespace + UTS/mount namespace per pod on a private bridge,
  fake GPU device nodes, idempotent teardown and a leftovers check; ``volumes``: the mounts
  a kubelet fills (configMaps, Secrets, emptyDirs, claims, the token, /etc/hosts).
- ``runtime``: each container's process, init containers, probes, exec, and waits on an
  injectable clock.
- ``scaleapi``: the one Kubernetes API the lab answers (statefulsets/scale; NotFound = 404).
- ``state``: the one state file per lab (/run/slurmk8s/labs/<id>.json), a section per owner.
- ``cluster``: boots, scales and tears down a whole lab from these parts.
- ``podinit``: the stdlib-only init that runs inside each pod before exec'ing its command.
"""
