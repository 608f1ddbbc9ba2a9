"""The launch host: load a launch document, compose and validate it, submit the child gang,
supervise it, export, and write the attempt and terminal manifests. Its only input is the
document; it never imports the experiment side."""
