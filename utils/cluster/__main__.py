"""python -m utils.cluster bench [LESSON...] --workers 1 2: the benchmark (utils/cluster/bench.py)."""

import sys

from utils.cluster.bench import main

sys.exit(main())
