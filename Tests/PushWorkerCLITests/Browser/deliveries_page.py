"""Drives the /deliveries page of a running worker in headless Chromium, as an operator would:
first with a wrong bearer token, then with the right one; prints what the page showed as JSON.

usage: deliveries_page.py URL TOKEN FIELD VALUE SCREENSHOT.png
"""
import json
import sys

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

url, token, field, value, screenshot = sys.argv[1:6]
options = Options()
for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,720"):
    options.add_argument(argument)
options.binary_location = "/usr/bin/chromium"
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
driver.set_page_load_timeout(60)
try:
    shown = {}
    driver.get(url + "/deliveries")
    shown["title"] = driver.title

    def search(bearer):
        box = driver.find_element(By.ID, "bearer")
        box.clear()
        box.send_keys(bearer)
        Select(driver.find_element(By.ID, "field")).select_by_value(field)
        entry = driver.find_element(By.ID, "value")
        entry.clear()
        entry.send_keys(value)
        before = driver.find_element(By.ID, "status").text
        driver.find_element(By.ID, "go").click()
        # The page says "Searching…", then the answer.
        WebDriverWait(driver, 60).until(lambda d: d.find_element(By.ID, "status").text not in (before, "Searching…"))
        status = driver.find_element(By.ID, "status")
        return status.text, status.get_attribute("class")

    shown["refused"], shown["refused_class"] = search("not-the-token-at-all")
    shown["status"], shown["status_class"] = search(token)
    shown["rows"] = [
        [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        for row in driver.find_elements(By.CSS_SELECTOR, "#results tbody tr")
    ]
    shown["row_classes"] = [row.get_attribute("class") for row in driver.find_elements(By.CSS_SELECTOR, "#results tbody tr")]
    driver.save_screenshot(screenshot)
    print(json.dumps(shown))
finally:
    driver.quit()
