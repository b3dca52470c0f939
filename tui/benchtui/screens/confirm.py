"""A yes/no modal, used to confirm quitting while runs are going on."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    """Asks one question; dismisses with True (confirm) or False (cancel)."""

    BINDINGS = [
        Binding("y", "confirm", "Yes", id="confirm-yes"),
        Binding("n,escape", "cancel", "No", id="confirm-no"),
    ]

    def __init__(
        self, question: str, detail: str = "", confirm_label: str = "Quit", cancel_label: str = "Keep running"
    ) -> None:
        super().__init__()
        self.question = question
        self.detail = detail
        self.confirm_label = confirm_label
        self.cancel_label = cancel_label

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(self.question, id="confirm-question")
            if self.detail:
                yield Static(self.detail, id="confirm-detail")
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{self.confirm_label} (y)", id="confirm", variant="error")
                yield Button(f"{self.cancel_label} (n)", id="cancel", variant="primary")

    def on_mount(self) -> None:
        # Focus the harmless choice: Enter keeps the runs going.
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm")

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)
