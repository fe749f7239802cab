#!/usr/bin/env bash
# tests/test_slurm.sh - the README's Slurm job script on a real one-node Slurm cluster
# (issue 19): munged, slurmctld and slurmd from Debian's packages, started here as root
# with a localhost slurm.conf in a temporary directory (ports 16817/16818); sbatch
# --array=0-3 --wait runs the script, gemmaembed merge joins the parts, and the result must
# equal an unsharded run byte for byte. Skipped, saying why, only where the daemons cannot
# start (not root, packages missing, a sandbox without sockets); the totals list the skip.
#
#   BIN=./gemmaembed MODEL=testdata/tiny-f32.gguf bash tests/test_slurm.sh
set -u
cd "$(dirname "$0")/.." || exit 1

BIN=${BIN:-./gemmaembed}
MODEL=${MODEL:-testdata/tiny-f32.gguf}
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d "${TMPDIR:-/tmp}/test_slurm.XXXXXX")
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
case $MODEL in /*) ;; *) MODEL=$PWD/$MODEL ;; esac
ROOT=$PWD
. tests/lib.sh

stop_cluster() {
    [ -f "$T/slurm.conf" ] && SLURM_CONF=$T/slurm.conf scontrol shutdown >/dev/null 2>&1
    for f in slurmctld slurmd munged; do
        [ -s "$T/$f.pid" ] && kill "$(cat "$T/$f.pid")" 2>/dev/null
    done
    sleep 0.5
    for f in slurmctld slurmd munged; do
        [ -s "$T/$f.pid" ] && kill -9 "$(cat "$T/$f.pid")" 2>/dev/null
    done
}
trap 'stop_cluster; rm -rf "$T"' EXIT
unset GEMMAEMBED_MODEL

cant() { skip "slurm cluster" "$1"; finish; exit 0; }
[ "$(id -u)" -eq 0 ] || cant "needs root to start munged, slurmctld and slurmd"
for d in munged slurmctld slurmd sbatch sinfo scontrol; do
    command -v "$d" >/dev/null || cant "$d not found (slurm-wlm and munge: tools/install-deps)"
done

# ---- the cluster -------------------------------------------------------------------------
cd "$T" || exit 1
mkdir -p state spool log bin
dd if=/dev/urandom of=munge.key bs=1024 count=1 2>/dev/null
chmod 400 munge.key
munged -f --key-file="$T/munge.key" --socket="$T/munge.sock" --pid-file="$T/munged.pid" \
    --log-file="$T/log/munged.log" --seed-file="$T/munged.seed" ||
    cant "munged does not start: $(tail -2 log/munged.log 2>/dev/null | tr '\n' ' ')"
H=$(hostname -s)
cat >slurm.conf <<EOF
ClusterName=gemmaembed-test
SlurmctldHost=$H(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
AuthInfo=socket=$T/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
PlugStackConfig=/dev/null
NodeName=$H NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$H Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$T/slurm.conf
slurmctld -f "$SLURM_CONF" && slurmd -f "$SLURM_CONF" ||
    cant "slurmctld/slurmd do not start: $(tail -3 log/slurm*.log 2>/dev/null | tr '\n' ' ')"
up=""
for _ in $(seq 60); do
    sinfo -h -o %t 2>/dev/null | grep -q idle && { up=1; break; }
    sleep 0.5
done
[ -n "$up" ] || cant "the node never became idle: $(sinfo 2>&1 | tr '\n' ' ') $(tail -3 log/slurmctld.log | tr '\n' ' ')"
pass "a one-node Slurm cluster is up (munged, slurmctld, slurmd)"

# ---- the README's job script ----------------------------------------------------------------
# the first ```sh block after the line that introduces it
awk '/^A Slurm job array, one shard per task/ {want = 1} want && /^```sh$/ {on = 1; next}
     on && /^```$/ {exit} on {print}' "$ROOT/README.md" >job.sh
grep -q -- '--shard "\$SLURM_ARRAY_TASK_ID/\$SLURM_ARRAY_TASK_COUNT"' job.sh &&
    grep -q '^#SBATCH --array=0-3' job.sh && pass "the README's job script found" ||
    fail "job script" "$(cat job.sh)"
"$PY" - <<'EOF'
import json, random
r = random.Random(9)
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
with open("corpus.jsonl", "w") as f:
    for i in range(400):
        f.write(('{"id": "bad%d", "text": \n' % i) if i % 53 == 7 else
                json.dumps({"id": i, "text": " ".join(r.choice(words) for _ in range(r.randint(1, 30)))}) + "\n")
EOF
ln -s "$BIN" bin/gemmaembed
export PATH=$T/bin:$PATH GEMMAEMBED_MODEL=$MODEL
gemmaembed -q corpus.jsonl -o one.npy --errors /dev/null
timeout 300 sbatch --wait --output="$T/log/task-%a.out" job.sh >sbatch.out 2>&1
rc=$?
ls part-*.npy >/dev/null 2>&1 && [ "$(ls part-?.npy | wc -l)" -eq 4 ] &&
    pass "sbatch --array=0-3 --wait: four parts (exit $rc: some records fail)" ||
    fail "sbatch" "exit $rc: $(cat sbatch.out log/task-*.out 2>/dev/null | head -c 400)"
gemmaembed merge -o merged.npy part-0.npy part-1.npy part-2.npy part-3.npy 2>merge.err
cmp -s merged.npy one.npy && cmp -s merged.npy.ids.jsonl one.npy.ids.jsonl &&
    cmp -s merged.npy.meta.json one.npy.meta.json &&
    pass "merged parts = one unsharded run, byte for byte (rows, ids, meta.json)" ||
    fail "merge of the Slurm parts" "$(cat merge.err; cmp merged.npy one.npy 2>&1)"

finish
