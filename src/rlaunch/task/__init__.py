"""Code that runs inside every allocated task: stage the immutable inputs, join the gang, and on
rank 0 hand the task-local document to the runtime's entrypoint."""
