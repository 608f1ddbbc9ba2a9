"""Commands that change a run after it was launched (today: cancel). `rlaunch.observe` only reads."""
