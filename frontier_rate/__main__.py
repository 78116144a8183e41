"""``python -m frontier_rate`` runs the ``frontier-rate`` command."""

from frontier_rate.cli import main

main()
