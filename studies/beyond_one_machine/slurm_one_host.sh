#!/usr/bin/env bash
# The sbatch script that `ferrylm launch --slurm` writes, run under a real SLURM on this one host: Debian's
# slurm-wlm and munge (installed when missing), a controller and a node daemon started here, then a data
# stage and a two-process training of the embedded SmolLM2 on CPU (gloo) submitted with sbatch. It checks
# that the job was accepted, that its batch step and its srun step both ran, and that the train stage
# wrote its record. As root, from the repository, after `make install`:
#
#   bash studies/beyond_one_machine/slurm_one_host.sh [WORK_DIR]          # default /tmp/ferrylm-slurm
#
# The daemons keep running afterwards (`scontrol shutdown; pkill -x munged` stops them).
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=$(realpath -m "${1:-/tmp/ferrylm-slurm}")
PY=${PY:-$PWD/.venv/bin/python}
[ "$(id -u)" = 0 ] || { echo "slurm_one_host: run as root (it starts munged, slurmctld and slurmd)" >&2; exit 2; }
command -v slurmctld >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge

# munge: the key and the daemon SLURM authenticates with
mkdir -p /etc/munge /var/log/munge /run/munge /var/lib/munge
[ -s /etc/munge/munge.key ] || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
chown -R munge:munge /etc/munge /var/log/munge /run/munge /var/lib/munge
chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged

# one node, this host, with what it has; no cgroups (containers rarely delegate them)
HOST=$(hostname -s); CPUS=$(nproc); MEM=$(free -m | awk '/^Mem:/ {print int($2 * 0.8)}')
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
cat > /etc/slurm/slurm.conf <<EOF
ClusterName=ferrylm
SlurmctldHost=$HOST
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd
for _ in $(seq 60); do sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix)' && break; sleep 1; done
sinfo

# the run: a small data stage here, the training through the script --slurm writes
rm -rf "$WORK" && mkdir -p "$WORK/corpus" && cd "$WORK"
STDLIB=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
cp -r "$STDLIB/json" "$STDLIB/textwrap.py" "$STDLIB/shlex.py" "$STDLIB/heapq.py" corpus/
OV=(run_dir="$WORK/run" data.sources="[$WORK/corpus]" data.max_pairs=64 data.max_seq_len=128 data.eval_fraction=0.3
    train.max_steps=4 train.save_steps=2 train.per_device_batch_size=1 train.eval_batches=2 train.logging_steps=1)
"$PY" -m ferrylm data "${OV[@]}" > data.log
"$PY" -m ferrylm launch --nproc 2 --cpu --cpus-per-task "$CPUS" --slurm job.sh "${OV[@]}"
JOB=$(sbatch --parsable --wait job.sh) || { echo "slurm_one_host: the job failed:" >&2; tail -n 30 ferrylm-*.out >&2; exit 1; }
scontrol show job "$JOB" 2>/dev/null | grep -E "JobState|ExitCode" || true
"$PY" - "$WORK" "$JOB" <<'PYEOF'
import json, pathlib, sys
work, job = pathlib.Path(sys.argv[1]), sys.argv[2]
out = (work / f"ferrylm-{job}.out").read_text()
record = json.loads((work / "run" / "train" / "record.json").read_text())
m = record["metrics"]
assert m["world_size"] == 2 and m["steps"] == 4, m
print(json.dumps({"job": job, "output": str(work / f"ferrylm-{job}.out"), "world_size": m["world_size"],
                  "steps": m["steps"], "eval_loss": m["eval_loss"], "base_eval_loss": m["base_eval_loss"],
                  "record": str(work / "run" / "train" / "record.json"), "output_lines": len(out.splitlines())}))
PYEOF
