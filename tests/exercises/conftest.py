import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # exercise_loader.py, exercise_mutants.py
