"""``python -m optimizer`` runs the gpuplan CLI."""

from .cli import main

main()
