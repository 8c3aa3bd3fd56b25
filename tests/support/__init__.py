"""What tests share besides fixtures: servers, processes, waiting, script recording, kits.

Test files import these modules; ``conftest.py`` files hold only fixtures and pytest
hooks, and no test imports from a conftest.
"""
