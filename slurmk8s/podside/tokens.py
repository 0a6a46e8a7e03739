#!/usr/bin/env python3
"""slurmrestd tokens: `scontrol token`'s command line and answer, and the tokens Job's program.

The CLI (`slurmk8s token USER`) imports token_argv and parse_token, so it and the pods mint the same way:
Slurm's own `scontrol token`, which slurmctld answers for SlurmUser and root. As the program of the
tokens CronJob and its first-fill Job (render/k8s/tokens.py) it mints a token for each user in
settings.json and writes it into that user's Secret, which `up` created empty. The Job's Role may patch
those Secrets by name and nothing else. Standard library only; kubeapi.py is shipped beside it.
"""

import base64
import json
import os
import subprocess
import sys
import time

TOKEN_KEY = "token"  # the Secret's key holding the JWT
EXPIRES_KEY = "expires"  # when it stops working, RFC 3339 UTC
USER_KEY = "user"
PREFIX = "SLURM_JWT="


def token_argv(user, lifespan):
    """scontrol's command line for a token of user that lives lifespan seconds."""
    return ["scontrol", "token", f"username={user}", f"lifespan={int(lifespan)}"]


def parse_token(stdout):
    """The JWT in scontrol token's answer (`SLURM_JWT=<jwt>`); ValueError for anything else."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if len(lines) != 1 or not lines[0].startswith(PREFIX) or lines[0].count(".") != 2:
        raise ValueError(f"scontrol token answered {' '.join(stdout.split())[:200]!r}, not {PREFIX}<jwt>")
    return lines[0][len(PREFIX):]


def secret_patch(user, token, expires):
    """The merge patch that puts a fresh token into a user's Secret."""
    data = {TOKEN_KEY: token, USER_KEY: user, EXPIRES_KEY: expires}
    return {"data": {k: base64.b64encode(v.encode()).decode() for k, v in sorted(data.items())}}


def rfc3339(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _scontrol(argv):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise ValueError(f"{' '.join(argv[:2])} failed ({done.returncode}): {' '.join(done.stderr.split())[:200]}")
    return done.stdout


def refresh(api, tokens, run=_scontrol, clock=time.time, say=print):
    """Mint and store each token; the users whose token could not be refreshed (their old token stays)."""
    failed = []
    for t in tokens:
        try:
            now = clock()
            token = parse_token(run(token_argv(t["user"], t["lifespan"])))
            api.merge_patch(f"/api/v1/namespaces/{api.namespace}/secrets/{t['secret']}",
                            secret_patch(t["user"], token, rfc3339(now + t["lifespan"])))
        except (OSError, ValueError, subprocess.TimeoutExpired) as e:
            say(f"slurmk8s-tokens: {t['user']}: {e}")
            failed.append(t["user"])
            continue
        say(f"slurmk8s-tokens: Secret {t['secret']} holds a token of {t['user']} until {rfc3339(now + t['lifespan'])}")
    return failed


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    # Here, not at the top: the CLI imports this module (token_argv, parse_token), where kubeapi is no top-level module.
    from kubeapi import Api  # noqa: E402  (shipped beside this file)
    with open(os.path.join(here, "settings.json")) as fh:
        settings = json.load(fh)
    failed = refresh(Api(), settings["tokens"], say=lambda line: print(line, flush=True))
    # Non-zero: the Job retries (backoffLimit), and a CronJob run that failed shows in its status.
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
