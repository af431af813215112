"""asyncio: a daemon whose only task awaits a stop event set by its SIGTERM
handler.

Source: the asyncio documentation's loop.add_signal_handler() and the usual
graceful-shutdown recipe (`loop.add_signal_handler(SIGTERM, stop.set)`
then `await stop.wait()`), as in aiohttp's and many services' run loops.

Senior engineer: idle, not hung: the program waits for a signal to stop, as
it was written to.
"""

import asyncio
import signal

import _field


async def main():
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    _field.report_later(_field.expect("idle", None))
    await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
