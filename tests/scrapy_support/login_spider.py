"""A spider that logs in with a POST (redirected to a GET) and then re-sends a request built
from one already downloaded, as real spiders do (``response.request.replace``)."""

from __future__ import annotations

import scrapy

from scrapy_support.spiders import RecordingSpider


class LoginSpider(RecordingSpider):
    name = "login"

    async def start(self):
        base = self.start_specs[0]["url"]
        yield scrapy.FormRequest(base + "/login", formdata={"user": "me"},
                                 callback=self.after_login)

    def after_login(self, response: scrapy.http.Response):
        yield from self._handle("after_login", response)
        # a request built from the downloaded one: carries what the middlewares added
        yield response.request.replace(url=response.urljoin("/account"), callback=self.parse,
                                       method="GET", body=b"")
