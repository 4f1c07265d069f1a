from django.urls import path

from dashboard import views

app_name = "dashboard"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("search/", views.time_travel, name="time_travel"),
    path("memories/<int:memory_id>/timeline/", views.timeline, name="timeline"),
    path("telemetry/", views.telemetry, name="telemetry"),
]
