"""``python -m frontier_rate`` runs the ``frontier-rate`` command."""

from .cli import main

main()
