"""gpubroker: the command-line client of the GPU broker's API v1 (requests, PyYAML, stdlib)."""

# exit codes
OK, API_ERROR, BAD_ARGUMENTS, NO_CONNECTION = 0, 1, 2, 3
