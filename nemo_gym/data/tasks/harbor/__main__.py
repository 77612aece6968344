"""``python -m nemo_gym.data.tasks.harbor``: the ``gym-harbor`` command."""

from nemo_gym.data.tasks.harbor.cli import main

raise SystemExit(main())
