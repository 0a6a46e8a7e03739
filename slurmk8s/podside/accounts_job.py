"""The GitOps Job's program: wait for slurmdbd, then apply the tree in $SLURMK8S_ACCOUNTS with sacctmgr.

Not a module on its own: the Job runs slurmk8s/podside/sacctmgr.py's source followed by this file's
(render.accounts.accounts_program), so Tree, apply_tree, tree_from_json and AccountsError come
from there. Standard library only; it runs in the controller image.
"""

import os
import subprocess
import sys
import time

WAIT_SECONDS = 900  # for slurmdbd to answer and slurmctld to register the cluster
POLL_SECONDS = 10


def _run_local(argv: list[str]) -> tuple[int, str, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 127, "", str(e)
    return done.returncode, done.stdout, done.stderr


def wait_for_cluster(run: RunFn, cluster: str, seconds: float, poll: float = POLL_SECONDS, sleep=time.sleep,
                     clock=time.monotonic) -> None:
    """Until slurmdbd answers and knows the cluster (slurmctld registers it when it starts)."""
    deadline = clock() + seconds
    while True:
        code, out, err = run(["sacctmgr", "-P", "-n", "show", "cluster", "format=cluster"])
        if code == 0 and cluster in out.split():
            return
        if clock() >= deadline:
            raise AccountsError(f"cluster {cluster} is not registered in slurmdbd after {seconds:.0f} s: "
                                f"{' '.join((err or out).split())[:200] or 'not listed'}")
        print(f"slurmk8s-accounts: waiting for slurmdbd to know cluster {cluster}", file=sys.stderr, flush=True)
        sleep(poll)


def main() -> int:
    """The Job's entry point: wait for slurmdbd, apply the tree in $SLURMK8S_ACCOUNTS, say what was run."""
    desired = tree_from_json(os.environ["SLURMK8S_ACCOUNTS"])
    try:
        wait_for_cluster(_run_local, desired.cluster, float(os.environ.get("SLURMK8S_ACCOUNTS_WAIT", WAIT_SECONDS)),
                         poll=float(os.environ.get("SLURMK8S_ACCOUNTS_POLL", POLL_SECONDS)))
        done = apply_tree(desired, _run_local, log=lambda line: print(line, flush=True))
    except AccountsError as e:
        print(f"slurmk8s-accounts: {e}", file=sys.stderr, flush=True)
        return 1
    print(f"slurmk8s-accounts: {len(done)} sacctmgr command(s) applied" if done
          else "slurmk8s-accounts: the tree is as the profile says", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
