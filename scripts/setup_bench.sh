#!/usr/bin/env bash
# Optional: everything setup.sh installs plus PyTorch (large), the peer that
# bench/ compares drx against (shared/peers/torch_fedavg.py).
set -euo pipefail
exec bash "$(dirname "$0")/setup.sh" python3-torch
