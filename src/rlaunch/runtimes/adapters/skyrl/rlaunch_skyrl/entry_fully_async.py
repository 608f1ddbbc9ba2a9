"""The `fully_async` entrypoint: the same adapter, driving SkyRL's fully-async trainer."""

from rlaunch_skyrl.entry import main

if __name__ == "__main__":
    main("fully_async")
