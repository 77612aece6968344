# Shared by every step's test.sh (Harbor lays each step's tests/ over this folder).

mkdir -p /logs/verifier
FAILED=0

check() {
  local description=$1
  shift
  if "$@"; then
    echo "PASS: $description"
  else
    echo "FAIL: $description"
    FAILED=1
  fi
}

write_reward() {
  if [ "$FAILED" -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
}
