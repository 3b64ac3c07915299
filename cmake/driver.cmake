# The spade command-line program and the Eigen adapter, with their tests.
