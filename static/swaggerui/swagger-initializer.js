window.onload = function() {
  // Toolbelt: the base layout (no top bar loading other documents), and no
  // deep-link anchors inside the operations' toggle buttons: both failed
  // axe (an unlabelled URL field; links nested in buttons), as did the
  // enum parameters' unnamed selects, which nameSelects names below
  // (TestE2ESwaggerAccessible).
  const ui = SwaggerUIBundle({
    url: "doc.json",
    dom_id: '#swagger-ui',
    validatorUrl: null,
    oauth2RedirectUrl: `${window.location.protocol}//${window.location.host}${window.location.pathname.split('/').slice(0, window.location.pathname.split('/').length - 1).join('/')}/oauth2-redirect.html`,
    persistAuthorization: false,
    presets: [
      SwaggerUIBundle.presets.apis,
      SwaggerUIStandalonePreset
    ],
    layout: "BaseLayout",
    docExpansion: "list",
    deepLinking: false,
    defaultModelsExpandDepth: 1
  })
  window.ui = ui

  // nameSelects gives each parameter's select (an enum's choices) the
  // parameter's name, which Swagger UI renders beside it but not as its
  // label.
  const root = document.getElementById("swagger-ui")
  const nameSelects = function() {
    root.querySelectorAll("tr[data-param-name] select:not([aria-label])").forEach(function(s) {
      const row = s.closest("tr[data-param-name]")
      s.setAttribute("aria-label", row.getAttribute("data-param-name") + " (" + row.getAttribute("data-param-in") + ")")
    })
  }
  new MutationObserver(nameSelects).observe(root, {childList: true, subtree: true})
}
