"""``python -m optimizer`` runs the gpuplan CLI."""

from .launch import main

main()
