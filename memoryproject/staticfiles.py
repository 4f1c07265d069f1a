"""WhiteNoise as middleware that does not push every request through a thread.

WhiteNoise's middleware is synchronous only, so under ASGI Django runs the whole
middleware chain around it in a worker thread and hops back to the event loop for the
rest: a cost every API and MCP request paid (about 0.5-1 ms of server CPU here,
benchmarks/results/http_floor.json), static file or not. This wrapper answers static
files itself (in a thread: opening a file blocks) and passes every other request on
in whichever mode the chain runs.
"""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.whitenoise = WhiteNoiseMiddleware(get_response)
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def _static_file(self, request):
        whitenoise = self.whitenoise
        return whitenoise.find_file(request.path_info) if whitenoise.autorefresh else \
            whitenoise.files.get(request.path_info)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        static_file = self._static_file(request)
        if static_file is not None:
            return self.whitenoise.serve(static_file, request)
        return self.get_response(request)

    async def _acall(self, request):
        static_file = self._static_file(request)
        if static_file is not None:
            return await sync_to_async(self.whitenoise.serve, thread_sensitive=False)(static_file, request)
        return await self.get_response(request)
