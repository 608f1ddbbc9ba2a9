"""Commands that change a run after it was launched: `rlaunch cancel`, and `rlaunch status`, which closes
an attempt whose jobs all ended (`finalise`). `rlaunch.observe` only reads."""
